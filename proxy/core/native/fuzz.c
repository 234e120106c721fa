/*
 * A bounded fuzz run of what the native relay reads of untrusted bytes (frames.h): the request
 * classifier with its Produce acks reader, and the Produce v10+ answer's NodeEndpoints walk.
 * Built with AddressSanitizer and UndefinedBehaviorSanitizer by scripts/native-fuzz.mjs, it feeds
 * them random bytes and mutations of well-formed frames from a fixed seed, each input in a heap
 * block of exactly its size (a read one byte past it is a heap-buffer-overflow), until a number of
 * inputs or of seconds is reached, and checks what the relay relies on:
 *   - the Fetch answer walk gives the same answer walked in any pieces as in one;
 *   - the classifier answers "more bytes", "JavaScript's", or the frame's whole length (12 bytes
 *     at least, the size prefix plus the declared size, within the frame limit), and a prefix of
 *     the bytes never gets another length or another plan;
 *   - the answer walk says "unchanged" for no strict prefix of an answer it says it of, nor for
 *     that answer with a byte more (the relay relays an answer only when it is exactly that);
 *   - the acks reader's answer (when not "more bytes" or "unreadable") does not change with bytes
 *     added after it.
 * No libFuzzer here (gcc has none, clang is not installed): a plain driver, so that it runs where
 * the addon builds.
 *
 *   fuzz <seed> <max inputs> <max seconds>   exits 0, or aborts with what failed
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frames.h"

#define MAX_FRAME 4096
#define MAX_INPUT 2048

static uint64_t rng;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static size_t below(size_t n) { return n == 0 ? 0 : (size_t)(next() % n); }

#define EXPECT(cond, ...)                                                                           \
  do {                                                                                              \
    if (!(cond)) {                                                                                  \
      fprintf(stderr, "fuzz: %s:%d: %s: ", __FILE__, __LINE__, #cond);                            \
      fprintf(stderr, __VA_ARGS__);                                                                 \
      fprintf(stderr, "\n");                                                                        \
      abort();                                                                                      \
    }                                                                                               \
  } while (0)

typedef struct {
  uint8_t b[MAX_INPUT];
  size_t n;
} bytes_t;

static void put(bytes_t *o, const void *p, size_t n) {
  if (o->n + n > MAX_INPUT) n = MAX_INPUT - o->n;
  memcpy(o->b + o->n, p, n);
  o->n += n;
}
static void u8(bytes_t *o, uint8_t v) { put(o, &v, 1); }
static void i16(bytes_t *o, int16_t v) {
  uint8_t b[2] = {(uint8_t)((uint16_t)v >> 8), (uint8_t)v};
  put(o, b, 2);
}
static void i32(bytes_t *o, int32_t v) {
  uint8_t b[4] = {(uint8_t)((uint32_t)v >> 24), (uint8_t)((uint32_t)v >> 16), (uint8_t)((uint32_t)v >> 8), (uint8_t)v};
  put(o, b, 4);
}
static void uvar(bytes_t *o, uint32_t v) {
  while (v >= 0x80) {
    u8(o, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  u8(o, (uint8_t)v);
}
static void filler(bytes_t *o, size_t n) {
  for (size_t i = 0; i < n; i++) u8(o, (uint8_t)next());
}
static void compact_string(bytes_t *o, size_t n) {
  uvar(o, (uint32_t)n + 1);
  filler(o, n);
}

/* A Produce request frame (size prefix included) of `version`, its header and acks well formed. */
static void produce_request(bytes_t *o, int16_t version, int flexible) {
  o->n = 4;
  i16(o, 0);
  i16(o, version);
  i32(o, (int32_t)next());
  size_t id = below(40);
  i16(o, next() % 8 == 0 ? -1 : (int16_t)id);
  filler(o, id);
  if (flexible) {
    size_t tags = below(3);
    uvar(o, (uint32_t)tags);
    for (size_t t = 0; t < tags; t++) {
      uvar(o, (uint32_t)below(5));
      compact_string(o, below(20));
    }
  }
  if (version >= 3) {
    size_t txn = below(300);
    if (flexible) compact_string(o, txn);
    else {
      i16(o, (int16_t)txn);
      filler(o, txn);
    }
  }
  i16(o, (int16_t)((int)below(3) - 1));
  filler(o, below(200));
  uint32_t size = (uint32_t)(o->n - 4);
  o->b[0] = (uint8_t)(size >> 24), o->b[1] = (uint8_t)(size >> 16), o->b[2] = (uint8_t)(size >> 8), o->b[3] = (uint8_t)size;
}

/* A Produce v10+ answer's payload (after the size prefix), with or without NodeEndpoints. */
static void produce_answer(bytes_t *o) {
  o->n = 0;
  i32(o, (int32_t)next());
  uvar(o, 0); /* header tagged fields */
  size_t topics = below(3);
  uvar(o, (uint32_t)topics + 1);
  for (size_t t = 0; t < topics; t++) {
    compact_string(o, below(10));
    size_t partitions = below(3);
    uvar(o, (uint32_t)partitions + 1);
    for (size_t i = 0; i < partitions; i++) {
      filler(o, 4 + 2 + 8 + 8 + 8);
      size_t errors = below(2);
      uvar(o, (uint32_t)errors + 1);
      for (size_t e = 0; e < errors; e++) {
        filler(o, 4);
        compact_string(o, below(8));
        uvar(o, 0);
      }
      compact_string(o, below(8));
      uvar(o, 0);
    }
    uvar(o, 0);
  }
  filler(o, 4); /* throttle_time_ms */
  size_t tags = below(3);
  uvar(o, (uint32_t)tags);
  for (size_t i = 0; i < tags; i++) {
    uvar(o, (uint32_t)i + (next() % 2 ? 0 : 1));
    compact_string(o, below(16));
  }
}

/* Tagged fields of up to `most` fields, each of a few bytes. */
static void tags(bytes_t *o, size_t most) {
  size_t n = below(most + 1);
  uvar(o, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    uvar(o, (uint32_t)below(4));
    compact_string(o, below(6));
  }
}

/* A Fetch v16-18 answer's payload (after the size prefix), with or without NodeEndpoints. */
static void fetch_answer(bytes_t *o) {
  o->n = 0;
  i32(o, (int32_t)next());
  tags(o, 1); /* header */
  filler(o, 10);
  size_t topics = below(3);
  uvar(o, (uint32_t)topics + 1);
  for (size_t t = 0; t < topics; t++) {
    filler(o, 16);
    size_t partitions = below(3);
    uvar(o, (uint32_t)partitions + 1);
    for (size_t i = 0; i < partitions; i++) {
      filler(o, 30);
      size_t aborted = below(3); /* 0: null */
      uvar(o, (uint32_t)aborted);
      for (size_t a = 1; a < aborted; a++) {
        filler(o, 16);
        tags(o, 1);
      }
      filler(o, 4);
      compact_string(o, below(40)); /* records */
      size_t known = below(3);
      uvar(o, (uint32_t)known);
      for (size_t k = 0; k < known; k++) {
        uvar(o, (uint32_t)k);
        uvar(o, k == 1 ? 9 : 13);
        filler(o, k == 1 ? 8 : 12);
        uvar(o, 0);
      }
    }
    tags(o, 1);
  }
  tags(o, 2); /* the top level: tag 0 is NodeEndpoints */
}

/* Flips, overwrites, cuts or lengthens a few bytes. */
static void mutate(bytes_t *o) {
  size_t k = below(4);
  for (size_t i = 0; i < k && o->n > 0; i++) {
    switch (below(4)) {
    case 0: o->b[below(o->n)] ^= (uint8_t)(1u << below(8)); break;
    case 1: o->b[below(o->n)] = (uint8_t)next(); break;
    case 2: o->n = below(o->n + 1); break;
    default: filler(o, below(8)); break;
    }
  }
}

/* `n` bytes of `src` in a heap block of exactly that size. */
static uint8_t *exact(const uint8_t *src, size_t n) {
  uint8_t *p = malloc(n ? n : 1);
  if (!p) abort();
  memcpy(p, src, n);
  return p;
}

static uint8_t plans[MAX_API * MAX_VERSION];

static void check_request(const bytes_t *in) {
  uint8_t *h = exact(in->b, in->n);
  pending_t e = {0}, ep = {0};
  int64_t total = classify_request(plans, MAX_FRAME, h, in->n, &e);
  EXPECT(total == HEAD_MORE || total == HEAD_JS || (total >= 12 && total <= 4 + MAX_FRAME), "%lld", (long long)total);
  if (total >= 0) EXPECT(total == 4 + (int64_t)be32(h), "%lld", (long long)total);
  if (total == HEAD_MORE) EXPECT(in->n < HEAD_MAX, "more wanted of %zu bytes", in->n);
  for (size_t cut = 0; cut < in->n; cut += 1 + below(16)) {
    uint8_t *prefix = exact(in->b, cut);
    int64_t t = classify_request(plans, MAX_FRAME, prefix, cut, &ep);
    if (t >= 0) {
      EXPECT(t == total, "prefix %zu: %lld, whole: %lld", cut, (long long)t, (long long)total);
      EXPECT(ep.plan == e.plan && ep.correlation_id == e.correlation_id, "prefix %zu: another entry", cut);
    }
    free(prefix);
  }
  if (in->n >= 8) {
    int flexible = (int)(next() % 2);
    int16_t version = be16(h + 2 + 4);
    int acks = produce_acks(h + 4, in->n - 4, version, flexible);
    EXPECT(acks >= INT16_MIN && acks <= INT16_MAX, "%d", acks);
    if (acks != -2 && acks != -3) {
      bytes_t longer = *in;
      filler(&longer, 1 + below(8));
      uint8_t *l = exact(longer.b, longer.n);
      EXPECT(produce_acks(l + 4, longer.n - 4, version, flexible) == acks, "acks changed with bytes after them");
      free(l);
    }
  }
  free(h);
}

static void check_answer(const bytes_t *in) {
  uint8_t *a = exact(in->b, in->n);
  /* v11's layout (v10-12: topic names) or v13's (topic ids) over the same bytes. */
  int16_t version = below(2) ? 11 : 13;
  int unchanged = produce_answer_unchanged(a, in->n, version);
  EXPECT(unchanged == 0 || unchanged == 1, "%d", unchanged);
  if (unchanged) {
    size_t cut = below(in->n);
    uint8_t *prefix = exact(in->b, cut);
    EXPECT(!produce_answer_unchanged(prefix, cut, version), "a prefix of %zu of %zu bytes", cut, in->n);
    free(prefix);
    if (in->n < MAX_INPUT) {
      bytes_t longer = *in;
      u8(&longer, (uint8_t)next());
      uint8_t *l = exact(longer.b, longer.n);
      EXPECT(!produce_answer_unchanged(l, longer.n, version), "with a byte more");
      free(l);
    }
  }
  free(a);
}

/*
 * The Fetch walk: walked in random pieces, the same answer (where the tail starts, or malformed)
 * as in one piece, which never ends before or past the bytes there are.
 */
static int check_fetch(const bytes_t *in) {
  uint8_t *a = exact(in->b, in->n);
  fetch_walk_t whole, cut;
  int s1 = fetch_walk_start(&whole, (int64_t)in->n), s2 = fetch_walk_start(&cut, (int64_t)in->n);
  size_t safe1 = 0, safe2 = 0;
  if (s1 != FW_BAD) safe1 = fetch_walk_feed(&whole, a, in->n, &s1);
  for (size_t off = 0; off < in->n && s2 == FW_GO;) {
    size_t k = 1 + below(in->n - off);
    uint8_t *piece = exact(a + off, k); /* a heap block of its own: a read past it is caught */
    safe2 += fetch_walk_feed(&cut, piece, k, &s2);
    free(piece);
    off += k;
  }
  EXPECT(s1 == s2, "whole %d, in pieces %d", s1, s2);
  if (s1 == FW_TAIL) {
    EXPECT(safe1 == safe2 && safe1 + (size_t)whole.left == in->n, "tail at %zu / %zu, left %lld of %zu", safe1, safe2,
           (long long)whole.left, in->n);
    (void)fetch_tail_unchanged(a + safe1, in->n - safe1);
  }
  free(a);
  return s1 == FW_TAIL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: fuzz <seed> <max inputs> <max seconds>\n");
    return 2;
  }
  rng = strtoull(argv[1], NULL, 10) | 1;
  unsigned long long max_inputs = strtoull(argv[2], NULL, 10);
  double max_seconds = strtod(argv[3], NULL);
  for (size_t i = 0; i < sizeof plans; i++) {
    static const uint8_t kinds[] = {PLAN_JS, PLAN_AS_IS, PLAN_WALK, PLAN_AS_IS | PLAN_ACKS, PLAN_WALK | PLAN_ACKS | PLAN_FLEXIBLE, PLAN_AS_IS | PLAN_ACKS | PLAN_FLEXIBLE};
    plans[i] = kinds[below(sizeof kinds)];
  }
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  unsigned long long n = 0, unchanged = 0, relayed = 0, walked = 0;
  bytes_t in;
  for (; n < max_inputs; n++) {
    if (n % 256 == 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 >= max_seconds) break;
    }
    switch (below(5)) {
    case 4:
      fetch_answer(&in);
      break;
    case 0:
      in.n = 0;
      filler(&in, below(600));
      break;
    case 1: {
      int16_t version = (int16_t)below(13);
      produce_request(&in, version, version >= 9);
      /* The plan of Produce `version` as the relay would have it, or not. */
      plans[version] = PLAN_AS_IS | PLAN_ACKS | (version >= 9 ? PLAN_FLEXIBLE : 0);
      break;
    }
    default:
      produce_answer(&in);
      break;
    }
    if (below(2)) mutate(&in);
    check_request(&in);
    check_answer(&in);
    walked += (unsigned long long)check_fetch(&in);
    uint8_t *a = exact(in.b, in.n);
    unchanged += (unsigned long long)produce_answer_unchanged(a, in.n, 11);
    free(a);
    pending_t e;
    if (classify_request(plans, MAX_FRAME, in.b, in.n, &e) >= 0) relayed++;
  }
  printf("fuzz: %llu inputs, %llu requests relayed whole, %llu answers unchanged, %llu Fetch answers walked to their tail, no failure\n", n,
         relayed, unchanged, walked);
  return 0;
}
