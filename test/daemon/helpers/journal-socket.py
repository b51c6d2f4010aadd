# A stand-in for journald's native socket (/run/systemd/journal/socket), for
# the journal test on hosts without journald: binds the AF_UNIX datagram
# socket libsystemd's sd_journal_sendv(3) sends to, and writes each entry it
# receives to stdout as one JSON object of its fields. Node's dgram has no
# AF_UNIX datagrams, hence Python. Entries in the binary field form
# (NAME\n<le64 length><value>\n) are decoded too.
import json, os, socket, struct, sys

path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
print(json.dumps({"ready": True}), flush=True)
while True:
    data = s.recv(1 << 20)
    fields = {}
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            fields[k.decode()] = v.decode("utf-8", "replace")
            i = nl + 1
        else:
            (n,) = struct.unpack_from("<Q", data, nl + 1)
            v = data[nl + 9 : nl + 9 + n]
            fields[line.decode()] = v.decode("utf-8", "replace")
            i = nl + 9 + n + 1
    print(json.dumps(fields), flush=True)
