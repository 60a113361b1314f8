// The tests of e2e/kernel/ (*.vm.ts), each in a VM of Debian's kernel (e2e/vm/): the link kinds
// this machine's kernel cannot make. A VM boots in about 8 s; its test then runs on emulated
// CPUs, a few times slower than here.
import t from 'tap';
import { readdirSync } from 'node:fs';
import { testInVm, vmPrerequisite } from './vm/vm.ts';

const perFileMs = 600_000;
const files = readdirSync(new URL('./kernel/', import.meta.url)).filter((f) => f.endsWith('.vm.ts')).sort();
t.setTimeout(files.length * (perFileMs + 90_000));
const skip = await vmPrerequisite();
for (const file of files) {
  t.test(file, { skip }, (t) => testInVm(t, `e2e/kernel/${file}`, { timeoutMs: perFileMs }));
}
