/*
 * What the native relay (relay.c) reads of the bytes it relays, with nothing of Node in it: the
 * plan bits, a request frame's classification by its header (and a Produce request's acks), the
 * Produce v10+ answer's NodeEndpoints walk. Every length is checked against the bytes there are.
 * relay.c includes it; so does the fuzz driver (fuzz.c), which feeds it arbitrary bytes under
 * AddressSanitizer and UndefinedBehaviorSanitizer.
 */
#ifndef RELAY_FRAMES_H
#define RELAY_FRAMES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- plan table (built by JavaScript, see native-relay.ts) --------------------------------- */

#define MAX_API 128
#define MAX_VERSION 32
/* Low two bits: who handles the frame. */
#define PLAN_JS 0        /* JavaScript reads it: hand the pair back */
#define PLAN_AS_IS 1     /* relayed, its answer as the broker wrote it */
#define PLAN_WALK 2      /* relayed, its answer walked for Produce NodeEndpoints */
#define PLAN_FETCH 3     /* relayed, its answer (Fetch v16-18) walked to its NodeEndpoints */
#define PLAN_KIND 3
#define PLAN_ACKS 4      /* Produce: acks=0 gets no answer */
#define PLAN_FLEXIBLE 8  /* request header v2 (tagged fields after the client id) */

/* Bytes of a request frame's start the relay looks at to classify it (header and Produce acks). */
#define HEAD_MAX 512

/* A request awaiting its answer. */
typedef struct pending {
  int32_t correlation_id;
  int16_t api_key;
  int16_t api_version;
  uint8_t plan;
  double started_ms;
} pending_t;

static inline int32_t be32(const uint8_t *p) {
  return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }

/* ---- byte parsing with bounds (every length checked against the bytes there are) ----------- */

typedef struct {
  const uint8_t *p;
  size_t len, off;
  int short_; /* ran past the end: more bytes needed */
  int bad;    /* malformed whatever follows */
} cursor_t;

static inline int need(cursor_t *c, size_t n) {
  if (c->short_ || c->bad) return 0;
  if (c->len - c->off < n) {
    c->short_ = 1;
    return 0;
  }
  return 1;
}
static inline void skip(cursor_t *c, uint64_t n) {
  if (c->short_ || c->bad) return;
  if (n > c->len - c->off) {
    c->short_ = 1;
    return;
  }
  c->off += (size_t)n;
}
static inline int16_t read16(cursor_t *c) {
  if (!need(c, 2)) return 0;
  int16_t v = be16(c->p + c->off);
  c->off += 2;
  return v;
}
static inline uint64_t uvarint(cursor_t *c) {
  uint64_t v = 0;
  for (int shift = 0; shift <= 28; shift += 7) {
    if (!need(c, 1)) return 0;
    uint8_t b = c->p[c->off++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  c->bad = 1; /* longer than an int32's varint */
  return 0;
}
static inline void skip_tagged_fields(cursor_t *c) {
  uint64_t n = uvarint(c);
  for (uint64_t i = 0; i < n && !c->short_ && !c->bad; i++) {
    uvarint(c);
    skip(c, uvarint(c));
  }
}
static inline void skip_compact_string(cursor_t *c) {
  uint64_t n = uvarint(c);
  if (n > 0) skip(c, n - 1);
}

/*
 * A Produce request's acks, from its payload's first `len` bytes (after the size prefix): the
 * int16 written (-1, 0, 1, or any other the broker refuses), or -2 when more bytes are needed, -3
 * when the bytes are not a Produce request this can read. A request with -2 or -3 written is taken
 * for those: JavaScript gets it (classify_request), which is safe.
 * Produce v3+ has a transactional id before acks; v9+ is flexible (compact strings, tagged header).
 */
static inline int produce_acks(const uint8_t *payload, size_t len, int16_t version, int flexible) {
  if (len < 8) return -2; /* the header's api key, version and correlation id, first */
  cursor_t c = {payload, len, 8, 0, 0};
  int16_t id_len = read16(&c); /* client id: int16-length nullable string in every header */
  if (id_len < -1) return -3;
  if (id_len > 0) skip(&c, (uint64_t)id_len);
  if (flexible) skip_tagged_fields(&c);
  if (version >= 3) {
    if (flexible) {
      skip_compact_string(&c);
    } else {
      int16_t n = read16(&c);
      if (n < -1) return -3;
      if (n > 0) skip(&c, (uint64_t)n);
    }
  }
  int16_t acks = read16(&c);
  if (c.bad) return -3;
  if (c.short_) return -2;
  return acks;
}

/*
 * Whether a Produce v10-13 answer (payload after the size prefix) may go to the client as written:
 * 1 when it has no NodeEndpoints (tag 0 of the top-level tagged fields), 0 when it has them or
 * its bytes are not what the walk expects (JavaScript then decodes it, and refuses it if need be).
 * The same walk as proxy/core/produce-endpoints.ts; v13 names a topic by its 16-byte id (KIP-516).
 */
static inline int produce_answer_unchanged(const uint8_t *payload, size_t len, int16_t version) {
  cursor_t c = {payload, len, 4, 0, 0}; /* correlation id */
  if (len < 4) return 0;
  skip_tagged_fields(&c); /* response header v1 */
  uint64_t topics = uvarint(&c);
  if (topics > 0) topics--;
  for (uint64_t t = 0; t < topics && !c.short_ && !c.bad; t++) {
    if (version >= 13) skip(&c, 16);
    else skip_compact_string(&c);
    uint64_t partitions = uvarint(&c);
    if (partitions > 0) partitions--;
    for (uint64_t i = 0; i < partitions && !c.short_ && !c.bad; i++) {
      skip(&c, 4 + 2 + 8 + 8 + 8);
      uint64_t errors = uvarint(&c);
      if (errors > 0) errors--;
      for (uint64_t e = 0; e < errors && !c.short_ && !c.bad; e++) {
        skip(&c, 4);
        skip_compact_string(&c);
        skip_tagged_fields(&c);
      }
      skip_compact_string(&c);
      skip_tagged_fields(&c);
    }
    skip_tagged_fields(&c);
  }
  skip(&c, 4); /* throttle_time_ms */
  uint64_t tags = uvarint(&c);
  int found = 0;
  for (uint64_t i = 0; i < tags && !c.short_ && !c.bad; i++) {
    if (uvarint(&c) == 0) found = 1;
    skip(&c, uvarint(&c));
  }
  if (c.short_ || c.bad || c.off != len) return 0;
  return !found;
}

/* ---- the Fetch v16-18 answer walk ---------------------------------------------------------- */

/*
 * A Fetch v16-18 answer may end with NodeEndpoints (KIP-951), top-level tag 0, which names brokers
 * by their real addresses; everything before the top-level tagged-field section (the record
 * batches: nearly every byte) names none. fetch_walk_feed walks the answer's payload (after its
 * size prefix) as its bytes arrive, cut anywhere, and says how many may go to the client at once;
 * the section at the end (w->left bytes once w->in_tail) is held and looked at whole.
 * The grammar is fetchResponseGrammar of proxy/core/fetch-stream.ts, with the same checks: an array
 * count or a field longer than the bytes left in the frame, a varint over 32 bits, a known
 * partition tag whose fields do not fill its size, are FW_BAD, where that walker throws.
 *
 * fetch_walk_step is a coroutine: it resumes at w->at (a case label inside its loops, the loops'
 * counters kept in w) and returns when it needs bytes: w->skip > 0 to pass over, or a varint
 * (w->want_varint), whose value is in w->value when it resumes.
 */
typedef struct {
  int64_t left; /* payload bytes not walked yet (at the tail: the tail's length) */
  int64_t skip; /* bytes to pass over before the next step */
  uint32_t value, vacc;
  int vindex, want_varint, in_tail, at;
  uint32_t topics, t, partitions, pi, aborted, ai, tags, ti, ptags, pti, ptag, psize;
  int64_t pstart; /* `left` where a known partition tag's fields started */
} fetch_walk_t;

enum { FW_GO = 0, FW_TAIL = 1, FW_BAD = -1 };

#define FW_SKIP_(n, id)                                                                            \
  do {                                                                                             \
    if ((uint64_t)(n) > (uint64_t)w->left) return FW_BAD;                                          \
    if ((n) > 0) {                                                                                 \
      w->skip = (int64_t)(n);                                                                      \
      w->at = (id);                                                                                \
      return FW_GO;                                                                                \
    }                                                                                              \
    __attribute__((fallthrough));                                                                  \
    case (id):;                                                                                    \
  } while (0)
#define FW_VARINT_(id)                                                                             \
  do {                                                                                             \
    w->want_varint = 1;                                                                            \
    w->vacc = 0;                                                                                   \
    w->vindex = 0;                                                                                 \
    w->at = (id);                                                                                  \
    return FW_GO;                                                                                  \
    case (id):;                                                                                    \
  } while (0)
/* __COUNTER__: a label of its own for every resumption point, several in one macro too. */
#define FW_SKIP(n) FW_SKIP_(n, __COUNTER__ + 1)
#define FW_VARINT() FW_VARINT_(__COUNTER__ + 1)
/* A count read as a varint must not exceed the bytes left (fetch-stream.ts checkCount). */
#define FW_COUNT(into, minus)                                                                      \
  do {                                                                                             \
    FW_VARINT();                                                                                   \
    if ((int64_t)w->value - (minus) > w->left) return FW_BAD;                                     \
    (into) = w->value - (minus);                                                                   \
  } while (0)
/* A tagged-field section whose fields are all passed over. */
#define FW_RAW_TAGS()                                                                              \
  do {                                                                                             \
    FW_COUNT(w->tags, 0);                                                                          \
    for (w->ti = 0; w->ti < w->tags; w->ti++) {                                                    \
      FW_VARINT();                                                                                 \
      FW_VARINT();                                                                                 \
      FW_SKIP(w->value);                                                                           \
    }                                                                                              \
  } while (0)

static inline int fetch_walk_step(fetch_walk_t *w) {
  switch (w->at) {
    case 0:
      FW_SKIP(4); /* correlation id */
      FW_RAW_TAGS(); /* response header v1 */
      FW_SKIP(10); /* throttle_time_ms, error_code, session_id */
      FW_VARINT();
      if (w->value == 0 || (int64_t)w->value - 1 > w->left) return FW_BAD; /* not nullable */
      w->topics = w->value - 1;
      for (w->t = 0; w->t < w->topics; w->t++) {
        FW_SKIP(16); /* topic_id */
        FW_VARINT();
        if (w->value == 0 || (int64_t)w->value - 1 > w->left) return FW_BAD;
        w->partitions = w->value - 1;
        for (w->pi = 0; w->pi < w->partitions; w->pi++) {
          /* partition_index, error_code, high_watermark, last_stable_offset, log_start_offset */
          FW_SKIP(30);
          FW_VARINT(); /* aborted transactions: a compact nullable array, 0 is null */
          if (w->value > 0) {
            if ((int64_t)w->value - 1 > w->left) return FW_BAD;
            w->aborted = w->value - 1;
            for (w->ai = 0; w->ai < w->aborted; w->ai++) {
              FW_SKIP(16); /* producer_id, first_offset */
              FW_RAW_TAGS();
            }
          }
          FW_SKIP(4); /* preferred_read_replica */
          FW_VARINT(); /* records: compact nullable bytes, 0 is null */
          if (w->value > 1) FW_SKIP(w->value - 1);
          /* The partition's tagged fields: the known ones (0-2) must fill their size exactly. */
          FW_COUNT(w->ptags, 0);
          for (w->pti = 0; w->pti < w->ptags; w->pti++) {
            FW_VARINT();
            w->ptag = w->value;
            FW_VARINT();
            w->psize = w->value;
            if (w->ptag > 2) {
              FW_SKIP(w->psize);
              continue;
            }
            if ((int64_t)w->psize > w->left) return FW_BAD;
            w->pstart = w->left;
            /* DivergingEpoch: int32, int64; CurrentLeader: int32, int32; SnapshotId: int64, int32 */
            FW_SKIP(w->ptag == 1 ? 8 : 12);
            FW_RAW_TAGS();
            if (w->pstart - w->left != (int64_t)w->psize) return FW_BAD;
          }
        }
        FW_RAW_TAGS(); /* the topic's */
      }
      w->in_tail = 1;
      return FW_TAIL;
    default:
      return FW_BAD;
  }
}

/* Starts the walk of an answer of `payload_len` bytes after its size prefix. */
static inline int fetch_walk_start(fetch_walk_t *w, int64_t payload_len) {
  memset(w, 0, sizeof *w);
  w->left = payload_len;
  return fetch_walk_step(w);
}

/*
 * Walks the next `len` bytes of the answer (never past its end): the count of them that may go to
 * the client now, with *status FW_GO (all walked), FW_TAIL (the bytes from the count on are the
 * tail's start) or FW_BAD (malformed: nothing of it may go on).
 */
static inline size_t fetch_walk_feed(fetch_walk_t *w, const uint8_t *b, size_t len, int *status) {
  size_t off = 0;
  *status = w->in_tail ? FW_TAIL : FW_GO;
  while (off < len && !w->in_tail) {
    if (w->skip > 0) {
      size_t k = (uint64_t)w->skip < len - off ? (size_t)w->skip : len - off;
      off += k;
      w->skip -= (int64_t)k;
      w->left -= (int64_t)k;
      if (w->skip > 0) break;
    } else if (w->want_varint) {
      uint8_t v = b[off++];
      w->left--;
      if (w->vindex == 4 && v > 0x0f) {
        *status = FW_BAD;
        return 0;
      }
      w->vacc |= (uint32_t)(v & 0x7f) << (7 * w->vindex);
      if (v & 0x80) {
        w->vindex++;
        continue;
      }
      w->value = w->vacc;
      w->want_varint = 0;
    }
    int r = fetch_walk_step(w);
    if (r == FW_BAD) {
      *status = FW_BAD;
      return 0;
    }
    if (r == FW_TAIL) *status = FW_TAIL;
  }
  return off;
}

/*
 * The answer's top-level tagged-field section, whole: 1 when it may go to the client as written
 * (well formed, no NodeEndpoints), 0 when JavaScript must see it (NodeEndpoints, or malformed).
 */
static inline int fetch_tail_unchanged(const uint8_t *s, size_t len) {
  cursor_t c = {s, len, 0, 0, 0};
  uint64_t n = uvarint(&c);
  for (uint64_t i = 0; i < n && !c.short_ && !c.bad; i++) {
    if (uvarint(&c) == 0) return 0;
    skip(&c, uvarint(&c));
  }
  return !c.short_ && !c.bad && c.off == len;
}

enum { HEAD_MORE = -1, HEAD_JS = -2 };

/*
 * Classifies the request frame starting at `h` (size prefix included, `len` bytes of it known):
 * HEAD_MORE to see more of it, HEAD_JS when JavaScript must have it, else its whole length, with
 * `*e` its pending entry (plan 0 when it gets no answer; started_ms not set). `plans` is the
 * plan table (MAX_API * MAX_VERSION bytes), frames over `max_frame_size` are JavaScript's.
 */
static inline int64_t classify_request(const uint8_t *plans, int32_t max_frame_size, const uint8_t *h, size_t len, pending_t *e) {
  if (len < 4) return HEAD_MORE;
  int32_t size = be32(h);
  if (size < 8 || size > max_frame_size) return HEAD_JS;
  int64_t total = 4 + (int64_t)size;
  if (len < 12) return HEAD_MORE;
  int16_t api = be16(h + 4), version = be16(h + 6);
  if (api < 0 || api >= MAX_API || version < 0 || version >= MAX_VERSION) return HEAD_JS;
  uint8_t plan = plans[api * MAX_VERSION + version];
  if ((plan & PLAN_KIND) == PLAN_JS) return HEAD_JS;
  e->correlation_id = be32(h + 8);
  e->api_key = api;
  e->api_version = version;
  e->plan = plan;
  if (plan & PLAN_ACKS) {
    size_t known = len < (size_t)total ? len : (size_t)total;
    int acks = produce_acks(h + 4, known - 4, version, (plan & PLAN_FLEXIBLE) != 0);
    if (acks == -2) return known >= HEAD_MAX || known == (size_t)total ? HEAD_JS : HEAD_MORE;
    if (acks == -3) return HEAD_JS;
    if (acks == 0) e->plan = 0;
  }
  return total;
}

#endif
