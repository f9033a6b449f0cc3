#!/usr/bin/env python3
"""Two-rank TCP probes of a link, run as `dreamddp launch -n 2 [--netem SPEC] -- python3 netprobe.py MODE DIR ...`:
rank 0 listens on MASTER_ADDR:MASTER_PORT, rank 1 connects (retrying for 10 s while rank 0 starts).

  netprobe.py echo DIR         rank 1 sends "hello", rank 0 answers it upper-cased; each rank writes
                               "IFNAME NETNS IFACES..." plus (rank 0) "MASTER PEER" / (rank 1) "REPLY OWN_ADDR" to DIR/rRANK
  netprobe.py rtt DIR [N]      N 1-byte TCP ping-pongs (default 200); rank 1 writes "MEDIAN P90" (ms) to DIR/rtt
  netprobe.py bulk DIR BYTES   rank 1 sends BYTES of a fixed pattern; rank 0 writes "RECEIVED ok|corrupt MBIT/S"
                               (first to last byte) to DIR/bulk
Standard library only: it runs under any python3.
"""
import hashlib
import os
import socket
import sys
import time


def serve(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    c, peer = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c, peer[0]


def connect(addr, port, wait_s=10):
    end = time.time() + wait_s
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return c
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.05)


def pattern(total):
    block = hashlib.sha256(b"dreamddp").digest() * 4096
    return (block * (total // len(block) + 1))[:total]


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("echo", "rtt", "bulk"):
        sys.exit(__doc__)
    mode, out = sys.argv[1], sys.argv[2]
    rank = int(os.environ["RANK"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if mode == "echo":
        ifaces = ",".join(sorted(n for _, n in socket.if_nameindex()))
        info = " ".join([os.environ.get("GLOO_SOCKET_IFNAME", "-"), os.environ.get("DREAMDDP_NETNS", "-"), ifaces])
        if rank == 0:
            c, peer = serve(addr, port)
            c.sendall(c.recv(100).upper())
            c.close()
            line = f"{info} {addr} {peer}"
        else:
            c = connect(addr, port)
            c.sendall(b"hello")
            reply, me = c.recv(100).decode(), c.getsockname()[0]
            c.close()
            line = f"{info} {reply} {me}"
        with open(os.path.join(out, f"r{rank}"), "w") as f:
            f.write(line + "\n")
    elif mode == "rtt":
        n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
        if rank == 0:
            c, _ = serve(addr, port)
            while True:
                b = c.recv(1)
                if not b:
                    break
                c.sendall(b)
        else:
            c = connect(addr, port)
            rtts = []
            for _ in range(n):
                t0 = time.perf_counter()
                c.sendall(b"p")
                c.recv(1)
                rtts.append((time.perf_counter() - t0) * 1e3)
            c.close()
            rtts.sort()
            with open(os.path.join(out, "rtt"), "w") as f:
                f.write(f"{rtts[len(rtts) // 2]:.3f} {rtts[len(rtts) * 9 // 10]:.3f}\n")
    else:
        total = int(sys.argv[3])
        data = pattern(total)
        if rank == 0:
            c, _ = serve(addr, port)
            h, got, t0 = hashlib.sha256(), 0, None
            while True:
                b = c.recv(1 << 20)
                if not b:
                    break
                if t0 is None:
                    t0, first = time.perf_counter(), len(b)
                h.update(b)
                got += len(b)
            dt = time.perf_counter() - t0 if t0 is not None else 0.0
            mbit = 8 * (got - first) / dt / 1e6 if dt > 0 else 0.0
            ok = got == total and h.digest() == hashlib.sha256(data).digest()
            with open(os.path.join(out, "bulk"), "w") as f:
                f.write(f"{got} {'ok' if ok else 'corrupt'} {mbit:.2f}\n")
        else:
            c = connect(addr, port)
            c.sendall(data)
            c.close()


if __name__ == "__main__":
    main()
