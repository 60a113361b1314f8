# A packet capture for the DSCP e2e test, run inside a netns: prints the DSCP of the first IPv4 or
# IPv6 packet from SOURCE that INTERFACE receives, as it is on the wire; exits 1 when none came
# within TIMEOUT seconds. Usage: capture-dscp.py INTERFACE SOURCE TIMEOUT
import socket
import sys
import time

interface, source, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
capture.bind((interface, 0))
end = time.monotonic() + timeout
while time.monotonic() < end:
    capture.settimeout(max(0.01, end - time.monotonic()))
    try:
        frame = capture.recv(65535)
    except socket.timeout:
        break
    ethertype, packet = int.from_bytes(frame[12:14], 'big'), frame[14:]
    if ethertype == 0x0800 and socket.inet_ntop(socket.AF_INET, packet[12:16]) == source:
        print(packet[1] >> 2)
        sys.exit(0)
    if ethertype == 0x86DD and socket.inet_ntop(socket.AF_INET6, packet[8:24]) == source:
        print((((packet[0] & 0x0F) << 4) | (packet[1] >> 4)) >> 2)
        sys.exit(0)
sys.exit(1)
