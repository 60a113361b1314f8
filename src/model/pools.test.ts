import t from 'tap';
import { staticAddressProblem } from './pools.ts';

t.test('a static address a Network\'s ranges cannot give is named with its index and why', async (t) => {
  const ranges = [{ subnet: '198.18.5.0/24', rangeStart: '198.18.5.10', rangeEnd: '198.18.5.20' }, { subnet: '2001:db8:5::/64' }];
  t.equal(staticAddressProblem('blue', ranges, ['198.18.5.12/24', '2001:db8:5::7']), undefined, 'inside a range, at its prefix length or none');
  t.match(staticAddressProblem('blue', ranges, ['198.18.5.12', '198.18.5.30/24']), { index: 1, reason: /198\.18\.5\.30 is outside every range/ });
  t.match(staticAddressProblem('blue', ranges, ['198.18.5.12/16']), { index: 0, reason: /does not have the prefix length of range 198\.18\.5\.0\/24/ });
  t.match(staticAddressProblem('blue', [{ subnet: '198.18.6.0/24' }], ['198.18.6.1']), { index: 0, reason: /198\.18\.6\.1 is the gateway of range/ });
  t.match(staticAddressProblem('blue', ranges, ['not-an-ip']), { index: 0, reason: /"not-an-ip" is not an IP address/ });
  t.equal(staticAddressProblem('blue', [{ subnet: '198.18.7.1/24' }], ['10.0.0.1']), undefined, "ranges that are wrong are the Network's problem, not the attachment's");
});
