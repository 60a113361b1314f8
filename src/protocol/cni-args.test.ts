import t from 'tap';
import { parseCniArgs, podIdentityFromArgs } from './cni-args.ts';

/** The pairs of a CNI_ARGS string as a plain object, for deep comparison. */
const pairs = (raw: string | undefined) => Object.fromEntries(parseCniArgs(raw));
const identity = (raw: string) => podIdentityFromArgs(parseCniArgs(raw));

t.test('parseCniArgs', async (t) => {
  t.test('the kubelet\'s CNI_ARGS', async (t) => {
    t.strictSame(
      pairs('IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_UID=0a1b-2c3d'),
      {
        IgnoreUnknown: '1',
        K8S_POD_NAMESPACE: 'shop',
        K8S_POD_NAME: 'web-0',
        K8S_POD_INFRA_CONTAINER_ID: 'abc123',
        K8S_POD_UID: '0a1b-2c3d',
      },
    );
  });

  t.test('unset or empty gives no pairs', async (t) => {
    t.strictSame(pairs(undefined), {});
    t.strictSame(pairs(''), {});
  });

  t.test('empty pairs are skipped', async (t) => {
    t.strictSame(pairs(';;K8S_POD_NAME=web-0;;'), { K8S_POD_NAME: 'web-0' });
  });

  t.test('a pair without "=" or without a key is skipped, the others kept', async (t) => {
    t.strictSame(pairs('IgnoreUnknown;K8S_POD_NAME=web-0;=orphan'), { K8S_POD_NAME: 'web-0' });
  });

  t.test('the value is everything after the first "="', async (t) => {
    t.strictSame(pairs('LABEL=a=b=c;EMPTY='), { LABEL: 'a=b=c', EMPTY: '' });
  });

  t.test('a repeated key keeps its last value', async (t) => {
    t.strictSame(pairs('K8S_POD_NAME=first;K8S_POD_NAME=second'), { K8S_POD_NAME: 'second' });
  });
});

t.test('podIdentityFromArgs', async (t) => {
  t.test('the kubelet gives the whole identity', async (t) => {
    t.strictSame(identity('K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_UID=0a1b-2c3d;K8S_POD_INFRA_CONTAINER_ID=abc123'), {
      namespace: 'shop',
      name: 'web-0',
      uid: '0a1b-2c3d',
      infraContainerId: 'abc123',
    });
  });

  t.test('podman gives only K8S_POD_NAME', async (t) => {
    t.strictSame(identity('IgnoreUnknown=1;K8S_POD_NAME=my-container'), { name: 'my-container' });
  });

  t.test('empty values and unrelated keys leave no field', async (t) => {
    t.strictSame(identity('K8S_POD_NAMESPACE=;K8S_POD_NAME=web-0;FOO=bar'), { name: 'web-0' });
    t.strictSame(podIdentityFromArgs(new Map()), {});
  });
});
