/* kv: a redis-like in-memory key/value store driven by one thread.
 *
 * Keys "key:<n>", n in [0, KEYS), live in a chained hash table (FNV-1a,
 * power-of-two bucket count >= KEYS, fixed).  Each entry, its key string
 * and its value are separate heap blocks, as in redis.  Every 16th key
 * (n % 16 == 0) is a list key, the others are string keys.
 *
 * Operation mix (keys uniform at random within their kind):
 *   40% GET    string key: copy the value into a reply buffer
 *   30% SET    string key: free the old value, malloc + fill a new one
 *              (16-64 B 50%, 65-256 B 30%, 257-1024 B 20%); creates the
 *              entry if missing
 *   12% LPUSH  list key: new node (malloc) with a payload (malloc 8-64 B);
 *              a list longer than 64 is trimmed from the tail (LTRIM)
 *   12% LPOP   list key: unlink the head, copy payload to the reply, free
 *              node and payload; an emptied list deletes its key
 *    6% DEL    any key: free entry, key and value / whole list
 * Before timing every string key is SET and every list key gets 8
 * elements.  Everything is freed at the end (not timed).
 *
 * Metric: ops/s = store operations per second. */
#include "bench.h"

static const char *usage =
    "usage: kv [OPS] [KEYS] [SEED]\n"
    "  OPS   store operations to run (default 5000000)\n"
    "  KEYS  key space size, >= 16 (default 100000); every 16th key is a list\n"
    "  SEED  RNG seed (default 1)\n"
    "Single-threaded redis-like store: 40% GET, 30% SET (values 16-1024 B),\n"
    "12% LPUSH, 12% LPOP (list nodes with 8-64 B payloads), 6% DEL.\n"
    "Reports: ops/s = store operations per second; check= is a checksum of\n"
    "the replies (identical across allocators for the same arguments).\n";

enum { T_STR = 1, T_LIST = 2 };
#define LIST_CAP 64

typedef struct lnode {
  struct lnode *next, *prev;
  char *data;
  uint32_t len;
} lnode_t;

typedef struct entry {
  struct entry *next;
  char *key;
  uint32_t klen;
  uint32_t hash;
  int type;
  union {
    struct {
      char *p;
      uint32_t len;
    } s;
    struct {
      lnode_t *head, *tail;
      uint32_t len;
    } l;
  } v;
} entry_t;

static entry_t **g_tab;
static size_t g_mask;
static size_t g_nkeys_live;
static bench_rng_t g_rng;
static uint64_t g_check;
static char g_reply[1024];

static uint32_t fnv1a(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  return h;
}

/* Formats "key:<n>" into buf, returns its length. */
static uint32_t make_key(char *buf, uint64_t n) {
  char tmp[24];
  int l = 0;
  do {
    tmp[l++] = (char)('0' + n % 10);
    n /= 10;
  } while (n != 0);
  memcpy(buf, "key:", 4);
  for (int i = 0; i < l; i++)
    buf[4 + i] = tmp[l - 1 - i];
  buf[4 + l] = '\0';
  return (uint32_t)(4 + l);
}

/* Finds the entry for key; *slot is where it is linked (or would be). */
static entry_t *lookup(const char *key, uint32_t klen, uint32_t h,
                       entry_t ***slot) {
  entry_t **pp = &g_tab[h & g_mask];
  while (*pp != NULL) {
    entry_t *e = *pp;
    if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
      break;
    pp = &e->next;
  }
  if (slot != NULL) *slot = pp;
  return *pp;
}

static entry_t *create(entry_t **slot, const char *key, uint32_t klen,
                       uint32_t h, int type) {
  entry_t *e = bench_xmalloc(sizeof *e);
  e->next = NULL;
  e->key = bench_xmalloc(klen + 1);
  memcpy(e->key, key, klen + 1);
  e->klen = klen;
  e->hash = h;
  e->type = type;
  memset(&e->v, 0, sizeof e->v);
  *slot = e;
  g_nkeys_live++;
  return e;
}

static void lnode_free(lnode_t *n) {
  free(n->data);
  free(n);
}

static void destroy(entry_t **slot) {
  entry_t *e = *slot;
  *slot = e->next;
  if (e->type == T_STR) {
    free(e->v.s.p);
  } else {
    lnode_t *n = e->v.l.head;
    while (n != NULL) {
      lnode_t *next = n->next;
      lnode_free(n);
      n = next;
    }
  }
  free(e->key);
  free(e);
  g_nkeys_live--;
}

static uint32_t value_size(void) {
  uint64_t r = bench_rng_next(&g_rng) % 100;
  if (r < 50) return (uint32_t)bench_rng_range(&g_rng, 16, 64);
  if (r < 80) return (uint32_t)bench_rng_range(&g_rng, 65, 256);
  return (uint32_t)bench_rng_range(&g_rng, 257, 1024);
}

static void op_set(const char *key, uint32_t klen, uint32_t h) {
  entry_t **slot;
  entry_t *e = lookup(key, klen, h, &slot);
  if (e == NULL) e = create(slot, key, klen, h, T_STR);
  uint32_t len = value_size();
  free(e->v.s.p);
  e->v.s.p = bench_xmalloc(len);
  memset(e->v.s.p, (int)(h + len) & 0x7f, len);
  e->v.s.len = len;
}

static void op_get(const char *key, uint32_t klen, uint32_t h) {
  entry_t *e = lookup(key, klen, h, NULL);
  if (e == NULL) {
    g_check += 1;
    return;
  }
  memcpy(g_reply, e->v.s.p, e->v.s.len);
  g_check += e->v.s.len * 31u + (unsigned char)g_reply[e->v.s.len / 2];
}

static void op_lpush(const char *key, uint32_t klen, uint32_t h) {
  entry_t **slot;
  entry_t *e = lookup(key, klen, h, &slot);
  if (e == NULL) e = create(slot, key, klen, h, T_LIST);
  lnode_t *n = bench_xmalloc(sizeof *n);
  n->len = (uint32_t)bench_rng_range(&g_rng, 8, 64);
  n->data = bench_xmalloc(n->len);
  memset(n->data, (int)n->len, n->len);
  n->prev = NULL;
  n->next = e->v.l.head;
  if (e->v.l.head != NULL)
    e->v.l.head->prev = n;
  else
    e->v.l.tail = n;
  e->v.l.head = n;
  if (++e->v.l.len > LIST_CAP) {
    lnode_t *t = e->v.l.tail;
    e->v.l.tail = t->prev;
    e->v.l.tail->next = NULL;
    e->v.l.len--;
    lnode_free(t);
  }
}

static void op_lpop(const char *key, uint32_t klen, uint32_t h) {
  entry_t **slot;
  entry_t *e = lookup(key, klen, h, &slot);
  if (e == NULL) {
    g_check += 2;
    return;
  }
  lnode_t *n = e->v.l.head;
  e->v.l.head = n->next;
  if (n->next != NULL)
    n->next->prev = NULL;
  else
    e->v.l.tail = NULL;
  memcpy(g_reply, n->data, n->len);
  g_check += n->len * 7u + (unsigned char)g_reply[0];
  lnode_free(n);
  if (--e->v.l.len == 0) destroy(slot);
}

static void op_del(const char *key, uint32_t klen, uint32_t h) {
  entry_t **slot;
  if (lookup(key, klen, h, &slot) != NULL) {
    destroy(slot);
    g_check += 3;
  }
}

int main(int argc, char **argv) {
  long long a[] = {5000000, 100000, 1};
  if (bench_start(argc, argv, usage, a, 3)) return 0;
  long long ops = a[0], keys = a[1], seed = a[2];
  if (ops < 1 || keys < 16 || keys > (1LL << 31)) return bench_bad_args(usage);
  bench_rng_seed(&g_rng, (uint64_t)seed);
  size_t nb = 1;
  while (nb < (size_t)keys)
    nb <<= 1;
  g_mask = nb - 1;
  g_tab = bench_xcalloc(nb, sizeof *g_tab);

  char key[32];
  uint64_t nlist = (uint64_t)(keys + 15) / 16; /* keys 0, 16, 32, ... */
  for (uint64_t n = 0; n < (uint64_t)keys; n++) {
    uint32_t kl = make_key(key, n);
    uint32_t h = fnv1a(key, kl);
    if (n % 16 == 0)
      for (int i = 0; i < 8; i++)
        op_lpush(key, kl, h);
    else
      op_set(key, kl, h);
  }

  unsigned long long counts[5] = {0, 0, 0, 0, 0};
  double t0 = bench_now();
  for (long long i = 0; i < ops; i++) {
    uint64_t r = bench_rng_next(&g_rng) % 100;
    uint64_t n;
    int kind;
    if (r < 40) {
      kind = 0;
    } else if (r < 70) {
      kind = 1;
    } else if (r < 82) {
      kind = 2;
    } else if (r < 94) {
      kind = 3;
    } else {
      kind = 4;
    }
    if (kind <= 1) { /* string key: not a multiple of 16 */
      n = bench_rng_next(&g_rng) % (uint64_t)keys;
      if (n % 16 == 0) n = (n + 1) % (uint64_t)keys;
      if (n % 16 == 0) n = 1; /* wrapped around to key 0 */
    } else if (kind <= 3) {
      n = (bench_rng_next(&g_rng) % nlist) * 16;
    } else {
      n = bench_rng_next(&g_rng) % (uint64_t)keys;
    }
    uint32_t kl = make_key(key, n);
    uint32_t h = fnv1a(key, kl);
    switch (kind) {
    case 0: op_get(key, kl, h); break;
    case 1: op_set(key, kl, h); break;
    case 2: op_lpush(key, kl, h); break;
    case 3: op_lpop(key, kl, h); break;
    default: op_del(key, kl, h); break;
    }
    counts[kind]++;
  }
  double secs = bench_now() - t0;
  size_t live = g_nkeys_live;
  long rss = bench_rss_kb();

  for (size_t b = 0; b < nb; b++)
    while (g_tab[b] != NULL)
      destroy(&g_tab[b]);
  free(g_tab);

  bench_result("kv",
               "ops=%lld keys=%lld seed=%lld get=%llu set=%llu lpush=%llu "
               "lpop=%llu del=%llu live_keys=%zu rss_end_kb=%ld "
               "check=%llu elapsed_s=%.3f ops/s=%.0f",
               ops, keys, seed, counts[0], counts[1], counts[2], counts[3],
               counts[4], live, rss, (unsigned long long)g_check, secs,
               (double)ops / secs);
  return 0;
}
