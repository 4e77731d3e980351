#!/usr/bin/env python3
"""Issue 15's figures in one run: keel serve, bench/floorproxy and HAProxy
in front of the same loopback `keel sim`, measured side by side.

    python3 bench/compare.py [--runs 3] [--rows latency,closed,streams,ttft,sweep]
                             [--proxies keel,floor,haproxy] [--before /path/to/old/keel]

Needs haproxy on PATH (Debian's package: apt-get install haproxy) and Go.
Builds ./cmd/keel and ./bench/floorproxy into $OUT (default
/tmp/keel-compare), starts every process itself on 127.0.0.1:1787x, and
stops them. Each row runs --runs times, alternating the proxies, and prints
every run and the median. CPU per call is the proxy process's utime+stime
from /proc/PID/stat over the run divided by the calls it served. Memory per
open stream is (VmHWM at 2,000 open slow streams - VmRSS idle) / 2,000.

--before adds a proxy "before": an older keel binary run as `keel serve`
with the same config on its own port, alternated with the others in every
row, so that a change is measured before and after in the same run.
--proxies picks the proxies (haproxy needs the package installed); "nolog"
is this keel with request_log disabled, so keel - nolog is the request
log's cost in the same run ("beforenolog": the same for --before).
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("OUT", "/tmp/keel-compare")
SIM, KEEL, FLOOR, HAP, BEFORE, NOLOG, BEFORENOLOG = 17879, 17878, 17881, 17885, 17877, 17876, 17875
TICK = os.sysconf("SC_CLK_TCK")
PROXIES = ["keel", "floor", "haproxy"]
PORT = {"direct": SIM, "keel": KEEL, "floor": FLOOR, "haproxy": HAP, "before": BEFORE, "nolog": NOLOG, "beforenolog": BEFORENOLOG}
BEFORE_BIN = None


def sh(*args, **kw):
    return subprocess.run(args, check=True, **kw)


def build():
    os.makedirs(OUT, exist_ok=True)
    sh("go", "build", "-o", f"{OUT}/keel", "./cmd/keel", cwd=ROOT)
    sh("go", "build", "-o", f"{OUT}/floorproxy", "./bench/floorproxy", cwd=ROOT)
    cfg = open(f"{ROOT}/bench/testdata/keel-sim.yaml").read()
    cfg = cfg.replace("127.0.0.1:7879", f"127.0.0.1:{SIM}").replace("127.0.0.1:7878", f"127.0.0.1:{KEEL}")
    open(f"{OUT}/keel.yaml", "w").write(cfg + f"request_log: {{path: {OUT}/requests.db}}\n")
    open(f"{OUT}/nolog.yaml", "w").write(cfg.replace(f"127.0.0.1:{KEEL}", f"127.0.0.1:{NOLOG}") + "request_log: {enabled: false}\n")
    open(f"{OUT}/beforenolog.yaml", "w").write(cfg.replace(f"127.0.0.1:{KEEL}", f"127.0.0.1:{BEFORENOLOG}") + "request_log: {enabled: false}\n")
    cfg = cfg.replace(f"127.0.0.1:{KEEL}", f"127.0.0.1:{BEFORE}")
    open(f"{OUT}/before.yaml", "w").write(cfg + f"request_log: {{path: {OUT}/before.db}}\n")


def wait_up(port, path="/"):
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except Exception:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not answer")


class Proc:
    def __init__(self, name, args, port, env=None):
        e = dict(os.environ)
        e.pop("GOMEMLIMIT", None)
        if env:
            e.update(env)
        self.name = name
        self.p = subprocess.Popen(args, cwd=ROOT, env=e, stdout=subprocess.DEVNULL, stderr=open(f"{OUT}/{name}.log", "w"))
        wait_up(port, "/v1/models" if name != "haproxy" else "/v1/models")
        time.sleep(0.3)

    def cpu(self):
        f = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / TICK

    def status(self, key):
        for line in open(f"/proc/{self.p.pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])  # kB
        return 0

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def start_sim(cfg="sim-zero.yaml"):
    return Proc("sim", [f"{OUT}/keel", "sim", "--config", f"bench/testdata/{cfg}", "--listen", f"127.0.0.1:{SIM}"], SIM)


def start(name):
    if name == "nolog":
        return Proc(name, [f"{OUT}/keel", "serve", "--config", f"{OUT}/nolog.yaml"], NOLOG)
    if name == "beforenolog":
        return Proc(name, [BEFORE_BIN, "serve", "--config", f"{OUT}/beforenolog.yaml"], BEFORENOLOG)
    if name in ("keel", "before"):
        db, binary, port = (f"{OUT}/requests.db", f"{OUT}/keel", KEEL) if name == "keel" else (f"{OUT}/before.db", BEFORE_BIN, BEFORE)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        cfgname = "keel" if name == "keel" else "before"
        return Proc(name, [binary, "serve", "--config", f"{OUT}/{cfgname}.yaml"], port)
    if name == "floor":
        return Proc("floor", [f"{OUT}/floorproxy", "-listen", f"127.0.0.1:{FLOOR}", "-upstream", f"http://127.0.0.1:{SIM}"], FLOOR)
    return Proc("haproxy", ["haproxy", "-db", "-f", "bench/testdata/haproxy.cfg"], HAP)


def bench(targets, *flags):
    out = f"{OUT}/bench.json"
    args = [f"{OUT}/keel", "bench", "--json", out]
    for t in targets:
        args += ["--target", f"{t}=http://127.0.0.1:{PORT[t]}"]
    args += list(flags)
    sh(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res = json.load(open(out))
    return {r["name"]: r for r in res["targets"]} if "targets" in res else res


def alone(p, name, *flags):
    """Loads proxy p (target name) alone; returns its result and its CPU
    per call in µs (utime+stime over the run ÷ calls)."""
    c0 = p.cpu()
    r = bench([name], *flags)[name]
    c1 = p.cpu()
    return r, (c1 - c0) / max(r["successes"] + r["errors"], 1) * 1e6


def load():
    return open("/proc/loadavg").read().split()[0]


def med(xs):
    return statistics.median(xs)


def row_latency(runs):
    print("\n## added latency at 1k req/s per target, non-streaming, interleaved (ms)")
    sim = start_sim()
    ps = {n: start(n) for n in PROXIES}
    added = {n: {"p50": [], "p99": []} for n in PROXIES}
    try:
        for i in range(runs):
            la = load()
            r = bench(["direct"] + PROXIES, "--rate", "1000", "--duration", "10s")
            d = r["direct"]
            line = f"run {i+1} (load {la}): direct p50 {d['p50_ms']:.3f} p99 {d['p99_ms']:.3f}"
            for n in PROXIES:
                a50, a99 = r[n]["p50_ms"] - d["p50_ms"], r[n]["p99_ms"] - d["p99_ms"]
                added[n]["p50"].append(a50)
                added[n]["p99"].append(a99)
                line += f" | {n} +{a50:.3f}/+{a99:.3f} err {r[n]['errors']} {r[n].get('errors_by_kind')}"
            print(line, flush=True)
    finally:
        for p in ps.values():
            p.stop()
        sim.stop()
    for n in PROXIES:
        print(f"median {n}: added p50 +{med(added[n]['p50']):.3f} ms, p99 +{med(added[n]['p99']):.3f} ms")


def row_closed(runs):
    print("\n## closed loop, 50 clients, 10 s, each proxy alone")
    sim = start_sim()
    ps = {n: start(n) for n in PROXIES}
    got = {n: {"rps": [], "cpu": [], "p99": []} for n in PROXIES}
    try:
        for i in range(runs):
            for n in PROXIES:
                la = load()
                r, cpu = alone(ps[n], n, "--concurrency", "50", "--duration", "10s")
                got[n]["rps"].append(r["throughput_rps"])
                got[n]["cpu"].append(cpu)
                got[n]["p99"].append(r["p99_ms"])
                print(f"run {i+1} {n} (load {la}): {r['throughput_rps']:.0f} req/s, {cpu:.1f} µs CPU/call, p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.2f} ms, err {r['errors']}", flush=True)
    finally:
        for p in ps.values():
            p.stop()
        sim.stop()
    f = got["floor"]
    for n in PROXIES:
        rps, cpu = med(got[n]["rps"]), med(got[n]["cpu"])
        p99 = med(got[n]["p99"])
        print(f"median {n}: {rps:.0f} req/s ({rps/med(f['rps']):.2f}x floor), {cpu:.1f} µs CPU/call ({cpu/med(f['cpu']):.2f}x floor), p99 {p99:.2f} ms ({p99/med(f['p99']):.2f}x floor)")


def row_streams(runs, n_streams=2000):
    print(f"\n## memory per open stream: {n_streams} slow streams (ttft 100ms, 150ms/token, 40 tokens), GOMEMLIMIT unset")
    sim = start_sim("sim-slow.yaml")
    got = {n: [] for n in PROXIES}
    try:
        for i in range(runs):
            for n in PROXIES:
                p = start(n)
                try:
                    idle = p.status("VmRSS")
                    la = load()
                    r = bench([n], "--stream", "--concurrency", str(n_streams), "--duration", "12s", "--max-tokens", "40", "--timeout", "30s")[n]
                    peak = p.status("VmHWM")
                finally:
                    p.stop()
                per = (peak - idle) / n_streams
                got[n].append(per)
                print(f"run {i+1} {n} (load {la}): idle {idle/1024:.1f} MB, peak {peak/1024:.1f} MB, {per:.1f} KB per stream, {r['successes']} streams, err {r['errors']}", flush=True)
    finally:
        sim.stop()
    for n in PROXIES:
        print(f"median {n}: {med(got[n]):.1f} KB per open stream")


def row_ttft(runs):
    print("\n## time to first token, streaming at 200 req/s per target, interleaved (ms)")
    sim = start_sim()
    ps = {n: start(n) for n in PROXIES}
    got = {n: [] for n in PROXIES}
    try:
        for i in range(runs):
            la = load()
            r = bench(["direct"] + PROXIES, "--stream", "--rate", "200", "--duration", "10s")
            d = r["direct"]["ttft_p50_ms"]
            line = f"run {i+1} (load {la}): direct TTFT p50 {d:.3f}"
            for n in PROXIES:
                got[n].append(r[n]["ttft_p50_ms"] - d)
                line += f" | {n} +{r[n]['ttft_p50_ms'] - d:.3f} err {r[n]['errors']}"
            print(line, flush=True)
    finally:
        for p in ps.values():
            p.stop()
        sim.stop()
    for n in PROXIES:
        print(f"median {n}: TTFT p50 added +{med(got[n]):.3f} ms")


def row_sweep(runs):
    print("\n## CPU per call at 100 / 1k / 3k req/s, each proxy alone, 10 s")
    sim = start_sim()
    ps = {n: start(n) for n in PROXIES}
    rates = [100, 1000, 3000]
    got = {(n, r): [] for n in ps for r in rates}
    try:
        for i in range(runs):
            for rate in rates:
                for n in ps:
                    la = load()
                    r, cpu = alone(ps[n], n, "--rate", str(rate), "--duration", "10s")
                    got[(n, rate)].append(cpu)
                    print(f"run {i+1} {n} {rate}/s (load {la}): {cpu:.1f} µs CPU/call, p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.2f} ms, err {r['errors']}", flush=True)
    finally:
        for p in ps.values():
            p.stop()
        sim.stop()
    for n in ps:
        xs = [med(got[(n, r)]) for r in rates]
        print(f"median {n}: " + ", ".join(f"{r}/s {x:.1f} µs" for r, x in zip(rates, xs)) + f"; max/min {max(xs)/min(xs):.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", default="latency,closed,streams,ttft,sweep")
    ap.add_argument("--streams", type=int, default=2000)
    ap.add_argument("--proxies", default="keel,floor,haproxy")
    ap.add_argument("--before", default="", help="an older keel binary, measured as proxy 'before'")
    a = ap.parse_args()
    global BEFORE_BIN
    PROXIES[:] = a.proxies.split(",")
    if a.before:
        BEFORE_BIN = os.path.abspath(a.before)
        PROXIES.insert(0, "before")
    build()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} nproc {os.cpu_count()} load {open('/proc/loadavg').read().strip()}")
    for row in a.rows.split(","):
        if row == "streams":
            row_streams(a.runs, a.streams)
        else:
            globals()["row_" + row](a.runs)
    print(f"\nend load {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    sys.exit(main())
