// A bridge Network's host bridge name lives with the rest of the bridge kind (kinds/bridge.ts);
// demo/demo.ts still imports it from here.
export { bridgeNameOf } from './kinds/bridge.ts';
