// What the daemon needs in Kubernetes mode alone, loaded only there: the Kubernetes client and
// the HTTP client it brings cost every other start of the command line, a standalone daemon's
// included, 9 MiB of memory and a third of `podnet --version`'s time otherwise (bench/resync).
export { KubeApi } from './api.ts';
export { KubeSource } from './informers.ts';
export { StatusPublisher } from './publisher.ts';
