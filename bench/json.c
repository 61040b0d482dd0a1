/* json: build JSON-like document trees, serialize them, free them.
 *
 * One thread.  Each document is a tree of about 1000-1600 small nodes
 * generated from the RNG: the root is an array of records; containers
 * (objects and arrays, at most 6 deep, 1..12 children) keep their children
 * (and, for objects, their key strings of 3..20 B) in arrays grown by
 * realloc (capacity doubling from 2); leaves are numbers, strings
 * (8..100 B), booleans and nulls.  Every node, key and string is its own
 * malloc'd block.  The tree is then serialized into a text buffer that
 * starts at 256 B and doubles by realloc (ends at 32-64 KiB), the text is
 * checksummed, and the tree and buffer are freed.
 *
 * Metric: ops/s = documents per second (build + serialize + free). */
#include "bench.h"

static const char *usage =
    "usage: json [DOCS] [SEED]\n"
    "  DOCS  documents to build, serialize and free (default 8000)\n"
    "  SEED  RNG seed (default 1)\n"
    "Each document: a tree of ~1000-1600 small nodes (objects with key\n"
    "strings and realloc-grown child arrays, numbers, 8-100 B strings),\n"
    "serialized into a buffer growing by realloc doubling to 32-64 KiB.\n"
    "Reports: ops/s = documents per second.\n";

enum { J_NULL, J_BOOL, J_INT, J_REAL, J_STR, J_ARR, J_OBJ };

typedef struct jnode {
  int type;
  union {
    int64_t i;
    int b;
    struct {
      char *s;
      size_t len;
    } str;
    struct {
      struct jnode **items;
      char **keys; /* objects only */
      size_t n, cap;
    } c;
  } u;
} jnode;

static bench_rng_t g_rng;
static unsigned long long g_mallocs, g_reallocs, g_frees;

static void *xmalloc(size_t n) {
  void *p = bench_xmalloc(n);
  g_mallocs++;
  return p;
}

static void *xrealloc(void *p, size_t n) {
  void *q = bench_xrealloc(p, n);
  g_reallocs++;
  return q;
}

static void xfree(void *p) {
  free(p);
  g_frees++;
}

static char *rand_string(size_t lo, size_t hi, size_t *out_len) {
  static const char chars[] = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789";
  size_t len = (size_t)bench_rng_range(&g_rng, lo, hi);
  char *s = xmalloc(len + 1);
  uint64_t r = bench_rng_next(&g_rng);
  for (size_t i = 0; i < len; i++) {
    s[i] = chars[(r >> (i % 58)) % 47];
    if (i % 8 == 7) r = r * 6364136223846793005ull + 1442695040888963407ull;
  }
  /* Occasionally something that needs escaping. */
  if (len > 10 && (r & 7) == 0) s[len / 2] = '"';
  s[len] = '\0';
  *out_len = len;
  return s;
}

static jnode *new_node(int type) {
  jnode *n = xmalloc(sizeof *n);
  memset(n, 0, sizeof *n);
  n->type = type;
  return n;
}

static void add_child(jnode *parent, jnode *child) {
  if (parent->u.c.n == parent->u.c.cap) {
    size_t cap = parent->u.c.cap ? parent->u.c.cap * 2 : 2;
    parent->u.c.items =
        xrealloc(parent->u.c.items, cap * sizeof(*parent->u.c.items));
    if (parent->type == J_OBJ)
      parent->u.c.keys =
          xrealloc(parent->u.c.keys, cap * sizeof(*parent->u.c.keys));
    parent->u.c.cap = cap;
  }
  if (parent->type == J_OBJ) {
    size_t kl;
    parent->u.c.keys[parent->u.c.n] = rand_string(3, 20, &kl);
  }
  parent->u.c.items[parent->u.c.n++] = child;
}

static jnode *gen(int depth, long *budget);

static jnode *gen_container(int type, int depth, long *budget) {
  jnode *c = new_node(type);
  int nchild = (int)bench_rng_range(&g_rng, 1, 12);
  for (int i = 0; i<nchild && * budget> 0; i++)
    add_child(c, gen(depth + 1, budget));
  return c;
}

static jnode *gen(int depth, long *budget) {
  (*budget)--;
  uint64_t r = bench_rng_next(&g_rng) % 100;
  if (depth < 6 && r < 22)
    return gen_container(r < 14 ? J_OBJ : J_ARR, depth, budget);
  r = bench_rng_next(&g_rng) % 100;
  jnode *n;
  if (r < 25) {
    n = new_node(J_INT);
    n->u.i = (int64_t)(bench_rng_next(&g_rng) % 2000000) - 1000000;
  } else if (r < 35) {
    n = new_node(J_REAL);
    n->u.i = (int64_t)(bench_rng_next(&g_rng) % 100000000); /* /1000 */
  } else if (r < 80) {
    n = new_node(J_STR);
    n->u.str.s = rand_string(8, 100, &n->u.str.len);
  } else if (r < 92) {
    n = new_node(J_BOOL);
    n->u.b = (int)(r & 1);
  } else {
    n = new_node(J_NULL);
  }
  return n;
}

static void free_tree(jnode *n) {
  if (n->type == J_STR) {
    xfree(n->u.str.s);
  } else if (n->type == J_ARR || n->type == J_OBJ) {
    for (size_t i = 0; i < n->u.c.n; i++) {
      free_tree(n->u.c.items[i]);
      if (n->type == J_OBJ) xfree(n->u.c.keys[i]);
    }
    if (n->u.c.items != NULL) xfree(n->u.c.items);
    if (n->u.c.keys != NULL) xfree(n->u.c.keys);
  }
  xfree(n);
}

typedef struct {
  char *p;
  size_t len, cap;
} buf_t;

static inline void buf_reserve(buf_t *b, size_t extra) {
  if (b->len + extra <= b->cap) return;
  size_t cap = b->cap;
  while (b->len + extra > cap)
    cap *= 2;
  b->p = xrealloc(b->p, cap);
  b->cap = cap;
}

static inline void buf_putc(buf_t *b, char c) {
  buf_reserve(b, 1);
  b->p[b->len++] = c;
}

static void buf_puts(buf_t *b, const char *s, size_t n) {
  buf_reserve(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void put_string(buf_t *b, const char *s, size_t n) {
  buf_reserve(b, 2 * n + 2);
  char *o = b->p + b->len;
  *o++ = '"';
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '"' || c == '\\') *o++ = '\\';
    *o++ = c;
  }
  *o++ = '"';
  b->len = (size_t)(o - b->p);
}

static void put_uint(buf_t *b, uint64_t v, int min_digits) {
  char tmp[24];
  int l = 0;
  do {
    tmp[l++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0 || l < min_digits);
  buf_reserve(b, (size_t)l);
  for (int i = 0; i < l; i++)
    b->p[b->len++] = tmp[l - 1 - i];
}

static void serialize(buf_t *b, const jnode *n) {
  switch (n->type) {
  case J_NULL: buf_puts(b, "null", 4); break;
  case J_BOOL:
    if (n->u.b)
      buf_puts(b, "true", 4);
    else
      buf_puts(b, "false", 5);
    break;
  case J_INT:
    if (n->u.i < 0) {
      buf_putc(b, '-');
      put_uint(b, (uint64_t)(-n->u.i), 1);
    } else {
      put_uint(b, (uint64_t)n->u.i, 1);
    }
    break;
  case J_REAL:
    put_uint(b, (uint64_t)n->u.i / 1000, 1);
    buf_putc(b, '.');
    put_uint(b, (uint64_t)n->u.i % 1000, 3);
    break;
  case J_STR: put_string(b, n->u.str.s, n->u.str.len); break;
  case J_ARR:
  case J_OBJ:
    buf_putc(b, n->type == J_OBJ ? '{' : '[');
    for (size_t i = 0; i < n->u.c.n; i++) {
      if (i > 0) buf_putc(b, ',');
      if (n->type == J_OBJ) {
        put_string(b, n->u.c.keys[i], strlen(n->u.c.keys[i]));
        buf_putc(b, ':');
      }
      serialize(b, n->u.c.items[i]);
    }
    buf_putc(b, n->type == J_OBJ ? '}' : ']');
    break;
  }
}

int main(int argc, char **argv) {
  long long a[] = {8000, 1};
  if (bench_start(argc, argv, usage, a, 2)) return 0;
  long long docs = a[0], seed = a[1];
  if (docs < 1) return bench_bad_args(usage);
  bench_rng_seed(&g_rng, (uint64_t)seed);

  uint64_t check = 0;
  unsigned long long nodes = 0, bytes = 0;
  size_t max_cap = 0;
  double t0 = bench_now();
  for (long long d = 0; d < docs; d++) {
    long budget0 = (long)bench_rng_range(&g_rng, 1000, 1600);
    long budget = budget0;
    jnode *root = new_node(J_ARR);
    while (budget > 0) {
      budget--;
      add_child(root, gen_container(J_OBJ, 1, &budget));
    }
    nodes += (unsigned long long)(budget0 - budget);

    buf_t b = {xmalloc(256), 0, 256};
    serialize(&b, root);
    buf_putc(&b, '\0');
    check = check * 31 + b.len + (unsigned char)b.p[b.len / 2];
    bytes += b.len;
    if (b.cap > max_cap) max_cap = b.cap;

    free_tree(root);
    xfree(b.p);
  }
  double secs = bench_now() - t0;

  bench_result("json",
               "docs=%lld seed=%lld nodes=%llu avg_doc_bytes=%llu "
               "max_buf_bytes=%zu mallocs=%llu reallocs=%llu frees=%llu "
               "check=%llu elapsed_s=%.3f ops/s=%.1f",
               docs, seed, nodes, bytes / (unsigned long long)docs, max_cap,
               g_mallocs, g_reallocs, g_frees, (unsigned long long)check, secs,
               (double)docs / secs);
  return 0;
}
