// The program's version, from package.json (inlined by the bundler in the executable).
import pkg from '../package.json' with { type: 'json' };

export const podnetVersion: string = pkg.version;
