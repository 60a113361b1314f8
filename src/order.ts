// The one order of strings podnet sorts by: their UTF-16 code units, as the C locale sorts ASCII.
// Not localeCompare: what podnet writes (a status, a table, a file's name) is compared with what
// another node or another start wrote, and must come out the same whatever the machine's locale.

/** a before b by their code units: for Array.prototype.sort. */
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
