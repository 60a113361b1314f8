// One error type for the whole program. A code says what kind of failure it is; each code maps to
// the CNI spec's numeric code (for the plugin's error object) and to an HTTP status (for the
// socket), so an error crosses the socket and reaches the runtime still typed.

/** The failure kinds podnet reports, with the CNI spec code and HTTP status each maps to. */
export const errorCodes = {
  INCOMPATIBLE_CNI_VERSION: { cni: 1, http: 400 },
  UNSUPPORTED_FIELD: { cni: 2, http: 400 },
  UNKNOWN_CONTAINER: { cni: 3, http: 404 },
  INVALID_ENVIRONMENT: { cni: 4, http: 400 },
  IO_FAILURE: { cni: 5, http: 500 },
  DECODE_FAILURE: { cni: 6, http: 400 },
  INVALID_CONFIG: { cni: 7, http: 400 },
  TRY_AGAIN_LATER: { cni: 11, http: 503 },
  NOT_AVAILABLE: { cni: 50, http: 503 },
  // podnet's own (the spec leaves 100 and up to plugins): CHECK found the attachment not as
  // recorded. Not 3, which would tell the runtime it need not run DEL.
  CHECK_FAILED: { cni: 100, http: 409 },
  // An attachment the pod marks required cannot be made (docs/adr/0028): its ADD fails, and the
  // kubelet tries the sandbox again.
  REQUIRED_UNMET: { cni: 101, http: 409 },
  // Daemon-side kinds; to a runtime they are I/O failures.
  NOT_FOUND: { cni: 5, http: 404 },
  CONFLICT: { cni: 5, http: 409 },
  INVALID_REQUEST: { cni: 5, http: 400 },
  METHOD_NOT_ALLOWED: { cni: 5, http: 405 },
  UNSUPPORTED_MEDIA_TYPE: { cni: 5, http: 415 },
  PAYLOAD_TOO_LARGE: { cni: 5, http: 413 },
  BUSY: { cni: 11, http: 503 },
  // A delegated plugin failed: its own CNI error is in the message.
  PLUGIN_FAILED: { cni: 5, http: 502 },
  INTERNAL: { cni: 999, http: 500 },
} as const;

export type ErrorCode = keyof typeof errorCodes;

export class PodnetError extends Error {
  readonly code: ErrorCode;
  readonly details: string | undefined;

  constructor(code: ErrorCode, message: string, details?: string) {
    super(message);
    this.name = 'PodnetError';
    this.code = code;
    this.details = details;
  }

  get cniCode(): number {
    return errorCodes[this.code].cni;
  }

  get httpStatus(): number {
    return errorCodes[this.code].http;
  }
}

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(errorCodes, value);
}

/** Wraps anything thrown into a PodnetError once, at an edge; a PodnetError passes untouched. */
export function toPodnetError(err: unknown, code: ErrorCode = 'INTERNAL'): PodnetError {
  if (err instanceof PodnetError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new PodnetError(code, message);
}
