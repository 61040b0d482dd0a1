"""apps: real programs from Debian's archive under an allocator.

    bench/apps.sh LIB CASE [--quick]

Runs one case with LIB preloaded into the program (an empty LIB: glibc)
and prints one line:

    bench=apps case=CASE size=N version=V secs=<wall> peak_rss_kb=<largest process>

Each case feeds its program an input generated here (deterministic, made
once per machine under $APPS_DATA, default build/apps-data) and checks the
result: a digest of what the program wrote must equal the digest of a run
without any preload (made once and kept next to the input), so a wrong
result under an allocator is an error (exit 1, no result line), never a
time. --quick (or APPS_QUICK=1) uses small inputs of their own: what
`make test` runs. Peak RSS is that of the largest process of the run's
tree, as GNU time reports it.

Cases: sqlite python ruby lua z3 ghostscript gcc sort rocksdb git
(redis-server is its own family, bench/redis_bench.sh).
"""
import hashlib
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TIME = "/usr/bin/time"  # GNU time (Debian package time)
ROOT = os.path.dirname(HERE)


# --------------------------------------------------------------- inputs
def lcg(seed):
    """A small deterministic generator (inputs must not depend on Python's
    random module version)."""
    x = seed & 0xFFFFFFFFFFFFFFFF
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        yield x >> 33


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def gen_sqlite(d, n):
    write(os.path.join(d, "work.sql"), """\
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER, g INTEGER, s TEXT);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %(n)d)
INSERT INTO t SELECT i, (i * 7919) %% 100003, i %% 997,
       printf('%%08x-%%d', (i * 2654435761) %% 4294967296, i %% 13) FROM c;
CREATE INDEX t_k ON t (k);
CREATE INDEX t_s ON t (s);
SELECT count(*), sum(k), min(s), max(s) FROM t;
SELECT g, count(*), sum(k) %% 1000003 FROM t GROUP BY g ORDER BY 3 DESC LIMIT 5;
SELECT count(*) FROM t a JOIN t b ON a.k = b.id WHERE b.g < 100;
SELECT s FROM t ORDER BY s LIMIT 5 OFFSET 1000;
SELECT group_concat(s, ',') FROM (SELECT s FROM t WHERE k BETWEEN 5000 AND 5100 ORDER BY s);
UPDATE t SET s = s || '+' WHERE g %% 3 = 0;
DELETE FROM t WHERE g %% 5 = 1;
SELECT count(*), sum(length(s)) FROM t;
""" % {"n": n})


PYTHON_WORK = '''\
import json, sys, threading

def work(seed, n):
    x = seed
    objs, words = {}, []
    acc = 0
    for i in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        key = "k%d" % (x % (n // 4 + 1))
        obj = objs.get(key)
        if obj is None or x % 7 == 0:
            obj = {"id": i, "tags": [str(x % 97), "t%d" % (i % 13)],
                   "name": "n" * (x % 40), "val": x / 3.0}
            objs[key] = obj
        obj["tags"].append(str(i % 11))
        if len(obj["tags"]) > 20:
            obj["tags"] = obj["tags"][-5:]
        words.append(("%x" % x) * (1 + x % 5))
        if len(words) > 2000:
            acc += len(" ".join(words)) % 1000
            words = words[1000:]
        if i % 500 == 0:
            text = json.dumps(list(objs.values())[:200], sort_keys=True)
            back = json.loads(text)
            acc += len(text) + len(back)
    return acc + len(objs)

n = int(sys.argv[1])
results = [0] * 4
def run(t):
    results[t] = work(t + 1, n)
threads = [threading.Thread(target=run, args=(t,)) for t in range(3)]
for t in threads: t.start()
run(3)
for t in threads: t.join()
print(results)
'''

RUBY_WORK = '''\
n = ARGV[0].to_i
x = 7
h = {}
acc = 0
words = []
n.times do |i|
  x = (x * 1103515245 + 12345) % 2147483648
  k = "k#{x % (n / 4 + 1)}"
  o = h[k]
  if o.nil? || x % 7 == 0
    o = { id: i, tags: [(x % 97).to_s, "t#{i % 13}"], name: "n" * (x % 40) }
    h[k] = o
  end
  o[:tags] << (i % 11).to_s
  o[:tags] = o[:tags].last(5) if o[:tags].size > 20
  words << x.to_s(16) * (1 + x % 5)
  if words.size > 2000
    acc += words.join(" ").size % 1000
    words = words.drop(1000)
  end
  acc += h.values.first(50).map { |v| v[:tags].join(",") }.join(";").size if i % 500 == 0
end
puts [acc, h.size].inspect
'''

LUA_WORK = '''\
local n = tonumber(arg[1])
local x, acc = 7, 0
local t, words = {}, {}
for i = 1, n do
  x = (x * 1103515245 + 12345) % 2147483648
  local k = "k" .. (x % (n // 4 + 1))
  local o = t[k]
  if o == nil or x % 7 == 0 then
    o = {id = i, tags = {tostring(x % 97), "t" .. (i % 13)}, name = string.rep("n", x % 40)}
    t[k] = o
  end
  o.tags[#o.tags + 1] = tostring(i % 11)
  if #o.tags > 20 then o.tags = {o.tags[17], o.tags[18], o.tags[19], o.tags[20], o.tags[21]} end
  words[#words + 1] = string.rep(string.format("%x", x), 1 + x % 5)
  if #words > 2000 then
    acc = acc + #table.concat(words, " ") % 1000
    local keep = {}
    for j = 1001, #words do keep[#keep + 1] = words[j] end
    words = keep
  end
end
local count = 0
for _ in pairs(t) do count = count + 1 end
print(acc, count)
'''


def gen_script(name, text):
    def gen(d, n):
        write(os.path.join(d, name), text)
    return gen


def gen_z3(d, n):
    """Satisfiable by construction: bit-vector sums and products over a
    planted assignment, one check per block of constraints (push/pop)."""
    r = lcg(11)
    v = 40
    sol = [next(r) % 4096 for _ in range(v)]
    out = ["(set-logic QF_BV)"]
    out += ["(declare-const v%d (_ BitVec 16))" % i for i in range(v)]
    for block in range(n):
        out.append("(push 1)")
        for _ in range(12):
            a, b, c = (next(r) % v for _ in range(3))
            val = (sol[a] * sol[b] + sol[c]) & 0xFFFF
            out.append("(assert (= (bvadd (bvmul v%d v%d) v%d) #x%04x))" % (a, b, c, val))
        out.append("(check-sat)")
        out.append("(pop 1)")
    write(os.path.join(d, "work.smt2"), "\n".join(out) + "\n")


def gen_ghostscript(d, n):
    """A PostScript program that draws n pages of curves, fills and text
    from its own generator."""
    write(os.path.join(d, "work.ps"), """%%!PS
/seed 1 def
/rnd { seed 1103515245 mul 12345 add 2147483648 mod /seed exch def seed } def
/Helvetica findfont 9 scalefont setfont
1 1 %(n)d {
  /page exch def
  1 1 700 {
    pop
    rnd 600 mod rnd 780 mod moveto
    rnd 600 mod rnd 780 mod rnd 600 mod rnd 780 mod rnd 600 mod rnd 780 mod curveto
    rnd 100 mod 100 div setgray
    rnd 3 mod 0 eq { closepath fill } { 0.5 setlinewidth stroke } ifelse
  } for
  1 1 60 { pop rnd 560 mod rnd 760 mod moveto (allocator) show } for
  showpage
} for
""" % {"n": n})


def gen_gcc(d, n):
    r = lcg(5)
    out = ["#include <stddef.h>", "struct s { int a[16]; double d; struct s *next; };"]
    for i in range(n):
        k = [next(r) % 97 + 1 for _ in range(6)]
        out.append("""
static int helper%(i)d(const int *v, size_t n) {
  int acc = %(k0)d;
  for (size_t j = 0; j < n; j++) {
    switch ((v[j] + j) %% 5) {
    case 0: acc += v[j] * %(k1)d; break;
    case 1: acc ^= v[j] << (j %% 7); break;
    case 2: acc -= v[j] / %(k2)d; break;
    case 3: acc = acc * %(k3)d + (int)j; break;
    default: acc += (v[j] > acc) ? %(k4)d : -%(k5)d;
    }
  }
  return acc;
}
int f%(i)d(struct s *p, int x) {
  int v[32];
  for (int j = 0; j < 32; j++) v[j] = x * j + p->a[j %% 16];
  double d = p->d;
  while (p->next != NULL && x-- > 0) { d += p->a[x & 15]; p = p->next; }
  return helper%(i)d(v, 32) + (int)d;
}""" % dict(i=i, k0=k[0], k1=k[1], k2=k[2], k3=k[3], k4=k[4], k5=k[5]))
    write(os.path.join(d, "work.c"), "\n".join(out) + "\n")


def gen_sort(d, n):
    r = lcg(3)
    syll = ["ka", "zu", "na", "ho", "mi", "re", "to", "shi", "ya", "ru", "ne", "ko"]
    with open(os.path.join(d, "work.txt"), "w") as f:
        for i in range(n):
            x = next(r)
            word = "".join(syll[(x >> s) % 12] for s in range(0, 4 * (2 + x % 5), 4))
            f.write("%s %d %s\n" % (word, x % 100000, "x" * (x % 23)))


def gen_git(d, n):
    """A repository of n commits over 150 files, made with fast-import."""
    repo = os.path.join(d, "repo")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", repo], check=True)
    r = lcg(9)
    files = {}
    chunks = []
    for c in range(n):
        lines = ["commit refs/heads/main", "mark :%d" % (c + 1),
                 "author A <a@example.org> %d +0000" % (1500000000 + c * 60),
                 "committer A <a@example.org> %d +0000" % (1500000000 + c * 60)]
        msg = "change %d" % c
        lines += ["data %d" % len(msg), msg]
        if c > 0:
            lines.append("from :%d" % c)
        for _ in range(12):
            name = "src/f%03d.txt" % (next(r) % 150)
            body = files.get(name, [])
            at = next(r) % (len(body) + 1)
            body = body[:at] + ["line %d of commit %d %s" % (i, c, "y" * (next(r) % 30))
                                for i in range(next(r) % 8 + 1)] + body[at + 3:]
            files[name] = body
            text = "\n".join(body) + "\n"
            lines += ["M 100644 inline %s" % name, "data %d" % len(text.encode()), text]
        chunks.append("\n".join(lines) + "\n")
    subprocess.run(["git", "-C", repo, "fast-import", "--quiet"],
                   input="".join(chunks).encode(), check=True)


# --------------------------------------------------------------- cases
# name: (generator of the input, full size, quick size, command(data dir,
# work dir) with None for the size, digest(work dir, stdout), Debian
# package)
def digest_files(*names):
    def take(work, stdout):
        h = hashlib.sha256()
        for n in names:
            with open(os.path.join(work, n), "rb") as f:
                h.update(f.read())
        return h.hexdigest()
    return take


def digest_stdout(work, stdout):
    return hashlib.sha256(stdout).hexdigest()


def digest_rocksdb(work, stdout):
    """db_bench's timings vary; what it found does not."""
    found = [l.split("(")[-1] for l in stdout.decode(errors="replace").splitlines()
             if l.startswith("readrandom")]
    if not found or " found)" not in found[0]:
        return "no readrandom result"
    return found[0].strip()


def digest_git(work, stdout):
    objects = subprocess.run(["git", "-C", os.path.join(work, "repo"), "count-objects", "-v"],
                             capture_output=True, text=True).stdout
    loose = [l for l in objects.splitlines() if l.startswith("count:")]
    return digest_files("log.txt")(work, stdout) + " " + " ".join(loose)


CASES = {
    "sqlite": (gen_sqlite, 800000, 20000,
               lambda d, w: ["sqlite3", ":memory:", ".read %s/work.sql" % d],
               digest_stdout, "sqlite3"),
    "python": (gen_script("work.py", PYTHON_WORK), 150000, 6000,
               lambda d, w: ["/usr/bin/python3", "%s/work.py" % d, None],
               digest_stdout, "python3"),
    "ruby": (gen_script("work.rb", RUBY_WORK), 400000, 10000,
             lambda d, w: ["ruby", "%s/work.rb" % d, None],
             digest_stdout, "ruby"),
    "lua": (gen_script("work.lua", LUA_WORK), 800000, 20000,
            lambda d, w: ["lua5.4", "%s/work.lua" % d, None],
            digest_stdout, "lua5.4"),
    "z3": (gen_z3, 200, 20,
           lambda d, w: ["z3", "%s/work.smt2" % d],
           digest_stdout, "z3"),
    "ghostscript": (gen_ghostscript, 160, 2,
                    lambda d, w: ["gs", "-q", "-dNOPAUSE", "-dBATCH", "-dSAFER",
                                  "-sDEVICE=pgmraw", "-r100", "-sOutputFile=%s/page-%%03d.pgm" % w,
                                  "%s/work.ps" % d],
                    lambda w, s: digest_files(*sorted(os.listdir(w)))(w, s),
                    "ghostscript"),
    "gcc": (gen_gcc, 600, 60,
            lambda d, w: ["gcc", "-O2", "-c", "-o", "%s/work.o" % w, "%s/work.c" % d],
            digest_files("work.o"), "gcc"),
    "sort": (gen_sort, 3500000, 30000,
             lambda d, w: ["sort", "--parallel=2", "-S", "256M", "-o", "%s/sorted.txt" % w,
                           "%s/work.txt" % d],
             digest_files("sorted.txt"), "coreutils"),
    "rocksdb": (None, 300000, 5000,
                lambda d, w: ["db_bench", "--benchmarks=fillrandom,readrandom",
                              "--db=%s/db" % w, "--num=N", "--reads=N", "--value_size=200",
                              "--threads=1", "--seed=1", "--compression_type=none",
                              "--statistics=0", "--histogram=0"],
                digest_rocksdb, "rocksdb-tools"),
    "git": (gen_git, 3000, 60,
            lambda d, w: ["sh", "-c", "git -C %s/repo gc --quiet && git -C %s/repo log -p "
                          "--no-color > %s/log.txt" % (w, w, w)],
            digest_git, "git"),
}


def version_of(case):
    """The Debian package and its version, e.g. sqlite3=3.40.1-2+deb12u1."""
    package = CASES[case][5]
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                         capture_output=True, text=True).stdout.strip()
    return "%s=%s" % (package, out or "unknown")


def prepare(case, quick):
    gen, full, small = CASES[case][:3]
    size = small if quick else full
    d = os.path.join(os.environ.get("APPS_DATA", os.path.join(ROOT, "build", "apps-data")),
                     "%s-%d" % (case, size))
    if not os.path.exists(os.path.join(d, ".done")):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        if gen is not None:
            gen(d, size)
        open(os.path.join(d, ".done"), "w").close()
    return d, size


def command(case, data, work, size):
    argv = CASES[case][3](data, work)
    argv = [str(size) if a is None else a.replace("=N", "=%d" % size) for a in argv]
    return argv


def run(case, data, work, size, lib):
    """One run in a fresh work dir; returns (secs, peak_rss_kb, stdout)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if case == "git":
        shutil.copytree(os.path.join(data, "repo"), os.path.join(work, "repo"))
    env = dict(os.environ, LC_ALL="C")
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = lib
    out_path = os.path.join(work, ".stdout")
    err_path = os.path.join(work, ".stderr")
    rss_path = os.path.join(work, ".rss")
    # Through GNU time: a process's peak RSS counts the memory it had before
    # exec, and time's is tiny where this Python process's is not. Its %M is
    # the largest of the program and the children it waited for.
    argv = [TIME, "-f", "%M", "-o", rss_path] + command(case, data, work, size)
    start = time.monotonic()
    pid = os.posix_spawn(TIME, argv, env, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT, 0o600),
        (os.POSIX_SPAWN_OPEN, 2, err_path, os.O_WRONLY | os.O_CREAT, 0o600)])
    _, status = os.waitpid(pid, 0)
    secs = time.monotonic() - start
    with open(out_path, "rb") as f:
        stdout = f.read()
    with open(err_path, "rb") as f:
        err = f.read().decode(errors="replace")
    with open(rss_path) as f:
        rss = int(f.read().split()[-1])
    for path in (out_path, err_path, rss_path):
        os.unlink(path)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("apps: %s exited with %d:\n%s" % (case, code, err[-3000:]))
    return secs, rss, stdout


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quick = "--quick" in sys.argv or os.environ.get("APPS_QUICK") == "1"
    if "--help" in sys.argv or len(args) != 2 or args[1] not in CASES:
        print(__doc__)
        return 0 if "--help" in sys.argv else 2
    lib, case = args
    for prog, package in ((CASES[case][3]("d", "w")[0], CASES[case][5]),
                          (TIME, "time")):
        if shutil.which(prog) is None:
            sys.exit("apps: %s is not installed (apt-get install %s, or "
                     "bench/install-peers.sh)" % (prog, package))
    data, size = prepare(case, quick)
    work = os.path.join(os.environ.get("TMPDIR", "/tmp"), "hz-apps-%s-%d" % (case, os.getpid()))
    try:
        expected_path = os.path.join(data, ".expected")
        if not os.path.exists(expected_path):
            _, _, out = run(case, data, work, size, "")
            with open(expected_path, "w") as f:
                f.write(CASES[case][4](work, out))
        secs, rss, out = run(case, data, work, size, lib)
        got = CASES[case][4](work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(expected_path) as f:
        want = f.read()
    if got != want:
        sys.exit("apps: %s produced a wrong result under %s: digest %s, expected %s"
                 % (case, lib or "glibc", got[:80], want[:80]))
    print("bench=apps case=%s size=%d version=%s secs=%.3f peak_rss_kb=%d"
          % (case, size, version_of(case), secs, rss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
