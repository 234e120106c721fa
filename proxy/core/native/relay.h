/*
 * The relay's native data path: a client connection and its broker connection relayed on Node's
 * own event loop without calling into JavaScript per read, for as long as every frame is one the
 * proxy passes on unread.
 *
 * The JavaScript connection (proxy/core/connection.ts) stays the owner of the pair and of every
 * decision. It hands the pair over ("attach") only when nothing is half done: no frame part way
 * read or written, no answer waiting for the client, nothing of its own in flight. From then on
 * the addon reads both sockets, through duplicates of their descriptors (the Node sockets stop
 * reading meanwhile), and for each request frame it looks up the plan table JavaScript computed
 * from proxy/core/api-plan.ts:
 *   - a request whose answer goes back unchanged ('as-is') is written to the broker as it is read,
 *     and its answer streamed back to the client, in order (a broker answers in order);
 *   - a Produce request is the same, but one with acks=0 gets no answer, and a Produce v10+ answer
 *     is walked for KIP-951 NodeEndpoints, which only JavaScript rewrites;
 *   - a Fetch v16-18 answer is streamed through its walk (frames.h) but for its last bytes, the
 *     top-level tagged fields, which go as written unless they hold NodeEndpoints: those
 *     JavaScript rewrites, to the same length, in a plain call (rewrite_fetch_tail);
 *   - a request larger than stream_limit (64 KiB) that spans reads is passed on as its bytes
 *     arrive once JavaScript's request memory pool reserves its declared size (reserve_request):
 *     nothing else goes to the broker until its last byte, and a pool exhausted hands it back;
 *   - anything else, and anything unexpected (a frame too large, a bad size, an answer out of
 *     order, bytes it cannot parse), is JavaScript's: the pair is handed back.
 * Handing back stops each direction at its next frame boundary, waits until everything written
 * has reached the kernel, closes the duplicates and calls JavaScript with what was read and not
 * passed on (from the first frame it did not take) and the requests still awaiting their answer.
 * JavaScript then goes on exactly as if it had read those bytes itself, so every error and every
 * rewrite keeps one implementation, in connection.ts.
 *
 * Nothing here decides what a broker would: it relays, keeps order and backpressure, or gives up.
 *
 * Memory per pair: at most one read (READ_BYTES) waiting in each direction (a side whose peer's
 * socket is full is not read), a Produce answer being gathered for its walk, and the queue of
 * requests awaiting answers (bounded by --max-in-flight plus the frames of one read).
 */
#ifndef RELAY_H
#define RELAY_H
/*
 * The addon's shared declarations. Its source is split by job:
 *   frames.h         what it reads of the bytes (request classifier, Produce acks, answer walk)
 *   relay-loop.c     the relay loop: reads, the frames' passage both ways, writes, backpressure
 *   relay-report.c   what goes to JavaScript: statistics, reservations, handing back, ends
 *   relay-napi.c     the JavaScript interface (Node-API), the lifetime of contexts and pairs
 *   c-stderr.c       not the relay's: the C library's stderr stream as JSON log lines
 */
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frames.h"

/* One read; a read buffer shared by every pair (reads are handled one at a time). */
#define READ_BYTES (256 * 1024)
/* Samples of answered requests kept for JavaScript's metrics before it is asked to take them. */
#define STATS_SAMPLES 4096
#define STATS_HEADER 8

/*
 * Reason codes reported to JavaScript when the relay stops on its own (native-relay.ts ENDS).
 * CLOSED_NATIVE_FAILED: a Node-API call failed in a libuv callback (no memory for the handback's
 * buffers, say): the pair cannot be handed back whole, so it ends and JavaScript closes it.
 * CLOSED_BAD_ANSWER: a Fetch answer being streamed is malformed (part of it has gone to the
 * client, so it cannot be handed back): the pair ends, as JavaScript ends it for such an answer.
 */
enum { CLOSED_CLIENT_ENDED = 1, CLOSED_CLIENT_ERROR, CLOSED_BROKER_ENDED, CLOSED_BROKER_ERROR, CLOSED_NATIVE_FAILED, CLOSED_BAD_ANSWER };

typedef struct context {
  napi_env env;
  uint8_t plans[MAX_API * MAX_VERSION];
  int32_t max_frame_size;
  /*
   * A larger request that spans reads is passed on only with a reservation of its declared size
   * in JavaScript's request memory pool (on_reserve), which bounds what half-sent large requests
   * hold across connections: at the broker, which reserves a request's declared size as soon as
   * it reads it. The pool exhausted, the request is JavaScript's (handed back), which mutes it.
   */
  int32_t stream_limit;
  uint32_t max_in_flight;
  /* performance.now() = uv_hrtime() / 1e6 + clock_offset_ms */
  double clock_offset_ms;
  napi_ref on_handback; /* (id, clientBytes, brokerBytes, pending) */
  napi_ref on_closed;   /* (id, reason, errno name) */
  napi_ref on_stats;    /* () : take the samples */
  napi_ref on_reserve;  /* (id, bytes) : true when reserved; (id, -bytes) lets go */
  napi_ref on_fetch_tail; /* (id, section, version) : the section rewritten, or undefined (bad) */
  napi_ref stats_ref;   /* the Float64Array below */
  double *stats;        /* [0] samples, [1..4] bytes client_in, client_out, broker_in, broker_out */
  napi_async_context async;
  int pairs; /* pairs not yet freed; the context outlives them */
  int released;
  int disposed; /* the callbacks are let go (dispose): nothing is reported any more */
  /* Every pair not yet freed (a list through pair_t.next), for the environment's teardown. */
  struct pair *first;
  int open_handles; /* uv handles of its pairs not closed yet */
  /* Registered while the context lives: closes its pairs' handles when the environment goes. */
  napi_async_cleanup_hook_handle cleanup;
  int env_gone; /* the environment is being torn down: no Node-API call any more */
#ifdef RELAY_TESTING_BUILD
  int fail_next_handback; /* failNextHandback: the next handback fails as a Node-API call would */
#endif
  /* Where every pair of this context reads: reads are handled one at a time on its loop. */
  uint8_t read_buffer[READ_BYTES];
} context_t;

struct pair;

typedef struct side {
  uv_tcp_t tcp; /* first: the handle's address is the side's */
  struct pair *pair;
  int is_client;
  int reading;
  int open;
  /* Bytes handed to uv_write and not written yet. */
  size_t queued;
  /* Stopped at a frame boundary while handing back. */
  int stopped;
  /* Bytes read and not passed on (handing back): from the first frame not taken. */
  uint8_t *left;
  size_t left_len, left_cap;
} side_t;

enum { ENGAGED, HANDING_BACK, DONE };

typedef struct pair {
  side_t client, broker;
  context_t *ctx;
  struct pair *prev, *next; /* in ctx->first */
  int32_t id;
  int state;
  /* Handles not closed yet, plus one while JavaScript holds the pair. */
  int refs;
  uint64_t last_active_ns;

  /* client -> broker: bytes of the current request frame still to pass on (0: at a boundary) */
  int64_t req_left;
  /* The request being passed on holds this reservation in the request memory pool (0: none). */
  int64_t reserved;
  uint8_t req_head[HEAD_MAX];
  size_t req_head_len;

  /* broker -> client: bytes of the current answer still to pass on (0: at a boundary) */
  int64_t resp_left;
  uint8_t resp_head[8];
  size_t resp_head_len;
  /* A Produce answer gathered whole for its walk (resp_whole_len of resp_whole_size). */
  uint8_t *resp_whole;
  size_t resp_whole_len, resp_whole_size;
  /*
   * A Fetch v16-18 answer being streamed (fetch_walking): its walk, and its top-level tagged
   * fields held until its last byte (fetch_tail_len of fetch.left bytes).
   */
  int fetch_walking;
  fetch_walk_t fetch;
  uint8_t *fetch_tail;
  size_t fetch_tail_len;

  /* Requests awaiting the broker's answer, oldest first (a ring). */
  pending_t *pend;
  uint32_t pend_cap, pend_first, pend_count;
} pair_t;


static inline double now_ms(const context_t *ctx) { return (double)uv_hrtime() / 1e6 + ctx->clock_offset_ms; }

/* relay-loop.c */
int pend_push(pair_t *p, pending_t e);
void update_reading(pair_t *p);

/* relay-report.c */
void count_bytes(context_t *ctx, int slot, double n);
void answered(pair_t *p, const pending_t *e);
int reserve_request(pair_t *p, int64_t size);
void release_request(pair_t *p);
void stop_side(side_t *s, const uint8_t *held, size_t held_len, const uint8_t *rest, size_t rest_len);
void start_handback(pair_t *p);
void close_sides(pair_t *p);
void maybe_handed_back(pair_t *p);
void stop_with(pair_t *p, int reason, int uv_err);
int rewrite_fetch_tail(pair_t *p, uint8_t *section, size_t len, int16_t version);

/* relay-napi.c */
void pair_unref(pair_t *p);
void cleanup_done(context_t *ctx);

/* c-stderr.c: the C library's stderr stream as JSON lines of the log (1: done, 0: not here). */
int route_c_stderr(const char *json_fields);
#ifdef RELAY_TESTING_BUILD
void print_to_c_stderr(const char *text);
#endif

#endif
