/*
 * The relay's native data path: a client connection and its broker connection relayed on Node's
 * own event loop without calling into JavaScript per read, for as long as every frame is one the
 * proxy passes on unread.
 *
 * The JavaScript connection (proxy/core/connection.ts) stays the owner of the pair and of every
 * decision. It hands the pair over ("attach") only when nothing is half done: no frame part way
 * read or written, no answer waiting for the client, nothing of its own in flight. From then on
 * this file reads both sockets, through duplicates of their descriptors (the Node sockets stop
 * reading meanwhile), and for each request frame it looks up the plan table JavaScript computed
 * from proxy/core/api-plan.ts:
 *   - a request whose answer goes back unchanged ('as-is') is written to the broker as it is read,
 *     and its answer streamed back to the client, in order (a broker answers in order);
 *   - a Produce request is the same, but one with acks=0 gets no answer, and a Produce v10+ answer
 *     is walked for KIP-951 NodeEndpoints, which only JavaScript rewrites;
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
 */
enum { CLOSED_CLIENT_ENDED = 1, CLOSED_CLIENT_ERROR, CLOSED_BROKER_ENDED, CLOSED_BROKER_ERROR, CLOSED_NATIVE_FAILED };

typedef struct context {
  napi_env env;
  uint8_t plans[MAX_API * MAX_VERSION];
  int32_t max_frame_size;
  /*
   * A larger request is passed on only once it is whole in one read; one that spans reads is
   * JavaScript's, whose request memory pool bounds what half-sent large requests hold (at the
   * broker too, which reserves a request's declared size as soon as it reads it).
   */
  int32_t stream_limit;
  uint32_t max_in_flight;
  /* performance.now() = uv_hrtime() / 1e6 + clock_offset_ms */
  double clock_offset_ms;
  napi_ref on_handback; /* (id, clientBytes, brokerBytes, pending) */
  napi_ref on_closed;   /* (id, reason, errno name) */
  napi_ref on_stats;    /* () : take the samples */
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
  uint8_t req_head[HEAD_MAX];
  size_t req_head_len;

  /* broker -> client: bytes of the current answer still to pass on (0: at a boundary) */
  int64_t resp_left;
  uint8_t resp_head[8];
  size_t resp_head_len;
  /* A Produce answer gathered whole for its walk (resp_whole_len of resp_whole_size). */
  uint8_t *resp_whole;
  size_t resp_whole_len, resp_whole_size;

  /* Requests awaiting the broker's answer, oldest first (a ring). */
  pending_t *pend;
  uint32_t pend_cap, pend_first, pend_count;
} pair_t;

static double now_ms(const context_t *ctx) { return (double)uv_hrtime() / 1e6 + ctx->clock_offset_ms; }

static void context_unref(context_t *ctx);
static void pair_unref(pair_t *p);
static void update_reading(pair_t *p);
static void maybe_handed_back(pair_t *p);
static void start_handback(pair_t *p);
static void stop_with(pair_t *p, int reason, int uv_err);

/* ---- the queue of requests awaiting answers -------------------------------------------------- */

static int pend_push(pair_t *p, pending_t e) {
  if (p->pend_count == p->pend_cap) {
    uint32_t cap = p->pend_cap ? p->pend_cap * 2 : 16;
    pending_t *grown = malloc(sizeof(pending_t) * cap);
    if (!grown) return 0;
    for (uint32_t i = 0; i < p->pend_count; i++) grown[i] = p->pend[(p->pend_first + i) % p->pend_cap];
    free(p->pend);
    p->pend = grown;
    p->pend_cap = cap;
    p->pend_first = 0;
  }
  p->pend[(p->pend_first + p->pend_count) % p->pend_cap] = e;
  p->pend_count++;
  return 1;
}

static pending_t *pend_head(pair_t *p) { return p->pend_count ? &p->pend[p->pend_first] : NULL; }

static void pend_pop(pair_t *p) {
  p->pend_first = (p->pend_first + 1) % p->pend_cap;
  p->pend_count--;
}

/* ---- statistics for JavaScript's metrics ------------------------------------------------------ */

/*
 * A JavaScript callback threw: the exception goes to process 'uncaughtException', as one thrown by
 * any I/O callback would (nothing here can handle it). Nothing more can be done if that fails.
 */
static void rethrow_pending(napi_env env) {
  bool pending = false;
  napi_value err;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
      napi_get_and_clear_last_exception(env, &err) == napi_ok)
    (void)napi_fatal_exception(env, err);
}

/*
 * THE RULE FOR CALLING JAVASCRIPT. This file calls JavaScript from libuv callbacks, often in the
 * middle of a read (client_read, broker_read) whose loop goes on with the pair afterwards. What
 * JavaScript runs then (the callback, and through node::MakeCallback every tick and microtask
 * queued before it) may call handBack, close or status on any pair, dispose the context, or
 * attach new pairs. So:
 *   - A callback scope (JS_CALLBACK: ticks and microtasks run after it, as after any I/O callback)
 *     is entered only for a pair already DONE, its sides closing: whatever JavaScript does to it
 *     then is a no-op, and the pair's memory is held until its handles are closed, which happens
 *     on a later turn of the loop, after the read that called returns. The read's loop checks
 *     the pair's state, or returns, after every step that may have stopped it.
 *   - A pair still relaying calls JavaScript only as a plain call (JS_PLAIN: the statistics are
 *     taken, answered()): no tick or microtask runs in it, and the callback (flushStats) reads the
 *     statistics array and touches no pair.
 *   - Nothing is called once the context is disposed or the environment is being torn down.
 * call_js is the only place that calls JavaScript; it refuses anything else.
 */
enum js_call { JS_PLAIN, JS_CALLBACK };

static void call_js(context_t *ctx, const pair_t *p, enum js_call how, napi_ref fn_ref, size_t argc, napi_value *argv) {
  napi_env env = ctx->env;
  napi_value fn, global, result;
  if (how == JS_CALLBACK && (p == NULL || p->state != DONE)) abort(); /* a bug here, not a runtime condition */
  if (ctx->disposed || napi_get_reference_value(env, fn_ref, &fn) != napi_ok || fn == NULL) return;
  if (napi_get_global(env, &global) != napi_ok) return;
  napi_status st = how == JS_CALLBACK ? napi_make_callback(env, ctx->async, global, fn, argc, argv, &result)
                                      : napi_call_function(env, global, fn, argc, argv, &result);
  if (st != napi_ok) rethrow_pending(env);
}

static void count_bytes(context_t *ctx, int slot, double n) {
  if (!ctx->disposed) ctx->stats[slot] += n;
}

static void answered(pair_t *p, const pending_t *e) {
  context_t *ctx = p->ctx;
  if (ctx->disposed) return;
  double *s = ctx->stats;
  size_t i = (size_t)s[0];
  if (i >= STATS_SAMPLES) {
    /* The pair is relaying, mid-read: a plain call (see call_js). */
    napi_env env = ctx->env;
    napi_handle_scope scope;
    if (napi_open_handle_scope(env, &scope) != napi_ok) return; /* the sample is lost */
    call_js(ctx, p, JS_PLAIN, ctx->on_stats, 0, NULL);
    (void)napi_close_handle_scope(env, scope);
    i = (size_t)s[0];
    if (i >= STATS_SAMPLES) return; /* not taken: the sample is lost, not the answer */
  }
  double *at = s + STATS_HEADER + 3 * i;
  at[0] = e->api_key;
  at[1] = e->api_version;
  at[2] = (now_ms(ctx) - e->started_ms) / 1000.0;
  s[0] = (double)(i + 1);
}

/* ---- writes ---------------------------------------------------------------------------------- */

typedef struct {
  uv_write_t req;
  side_t *to;
  size_t len;
  uint8_t bytes[];
} write_req_t;

static void on_written(uv_write_t *req, int status) {
  write_req_t *w = (write_req_t *)req;
  side_t *to = w->to;
  pair_t *p = to->pair;
  to->queued -= w->len;
  free(w);
  if (status < 0) {
    if (status != UV_ECANCELED) stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, status);
    return;
  }
  if (to->is_client) p->last_active_ns = uv_hrtime();
  update_reading(p);
  maybe_handed_back(p);
}

/*
 * Writes the pieces to `to`: at once where the kernel takes them, the rest copied and queued (in
 * order behind anything queued before). 0 on a write error (the pair is stopped).
 */
static int send_pieces(side_t *to, uv_buf_t *pieces, unsigned n) {
  pair_t *p = to->pair;
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += pieces[i].len;
  if (total == 0) return 1;
  count_bytes(p->ctx, to->is_client ? 2 : 4, (double)total);
  size_t done = 0;
  if (to->queued == 0) {
    int r = uv_try_write((uv_stream_t *)&to->tcp, pieces, n);
    if (r >= 0) done = (size_t)r;
    else if (r != UV_EAGAIN) {
      stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, r);
      return 0;
    }
    if (to->is_client && done > 0) p->last_active_ns = uv_hrtime();
    if (done == total) return 1;
  }
  size_t rest = total - done;
  write_req_t *w = malloc(sizeof(write_req_t) + rest);
  if (!w) {
    stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, UV_ENOMEM);
    return 0;
  }
  size_t at = 0, skipped = 0;
  for (unsigned i = 0; i < n; i++) {
    size_t len = pieces[i].len, from = 0;
    if (skipped < done) {
      size_t s = done - skipped < len ? done - skipped : len;
      skipped += s;
      from = s;
    }
    memcpy(w->bytes + at, pieces[i].base + from, len - from);
    at += len - from;
  }
  w->to = to;
  w->len = rest;
  to->queued += rest;
  uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)rest);
  int r = uv_write(&w->req, (uv_stream_t *)&to->tcp, &b, 1, on_written);
  if (r < 0) {
    to->queued -= rest;
    free(w);
    stop_with(p, to->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, r);
    return 0;
  }
  return 1;
}

/* Pieces of one read to write on, gathered so that they go in one system call. */
#define MAX_PIECES 64
typedef struct {
  uv_buf_t b[MAX_PIECES];
  unsigned n;
} pieces_t;

static int add_piece(side_t *to, pieces_t *out, const uint8_t *base, size_t len) {
  if (len == 0) return 1;
  if (out->n > 0) {
    uv_buf_t *last = &out->b[out->n - 1];
    if ((const uint8_t *)last->base + last->len == base) {
      last->len += len;
      return 1;
    }
  }
  if (out->n == MAX_PIECES) {
    if (!send_pieces(to, out->b, out->n)) return 0;
    out->n = 0;
  }
  out->b[out->n++] = uv_buf_init((char *)base, (unsigned)len);
  return 1;
}

/* ---- handing back ---------------------------------------------------------------------------- */

static int keep_left(side_t *s, const uint8_t *bytes, size_t len) {
  if (len == 0) return 1;
  if (s->left_len + len > s->left_cap) {
    size_t cap = s->left_len + len;
    uint8_t *grown = realloc(s->left, cap);
    if (!grown) return 0;
    s->left = grown;
    s->left_cap = cap;
  }
  memcpy(s->left + s->left_len, bytes, len);
  s->left_len += len;
  return 1;
}

/* The side stops at a frame boundary; `rest` (read, not passed on) goes back to JavaScript. */
static void stop_side(side_t *s, const uint8_t *held, size_t held_len, const uint8_t *rest, size_t rest_len) {
  pair_t *p = s->pair;
  s->stopped = 1;
  /* Counted when read; JavaScript counts them again when it reads them. */
  count_bytes(p->ctx, s->is_client ? 1 : 3, -(double)(held_len + rest_len));
  if (!keep_left(s, held, held_len) || !keep_left(s, rest, rest_len)) {
    stop_with(p, s->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, UV_ENOMEM);
    return;
  }
  if (s->reading) {
    uv_read_stop((uv_stream_t *)&s->tcp);
    s->reading = 0;
  }
  if (p->state == ENGAGED) start_handback(p);
}

static void start_handback(pair_t *p) {
  if (p->state != ENGAGED) return;
  p->state = HANDING_BACK;
  /*
   * A side between frames stops now, with the start of a frame it holds (nothing of which was
   * passed on); a side part way through passing a frame on stops at its end.
   */
  if (!p->client.stopped && p->req_left == 0) {
    size_t held = p->req_head_len;
    p->req_head_len = 0;
    stop_side(&p->client, p->req_head, held, NULL, 0);
  }
  if (p->state == HANDING_BACK && !p->broker.stopped && p->resp_left == 0) {
    if (p->resp_whole != NULL) {
      uint8_t *whole = p->resp_whole;
      p->resp_whole = NULL;
      stop_side(&p->broker, whole, p->resp_whole_len, NULL, 0);
      free(whole);
    } else {
      size_t held = p->resp_head_len;
      p->resp_head_len = 0;
      stop_side(&p->broker, p->resp_head, held, NULL, 0);
    }
  }
  update_reading(p);
  maybe_handed_back(p);
}

static void cleanup_done(context_t *ctx);

static void on_handle_closed(uv_handle_t *h) {
  pair_t *p = ((side_t *)h)->pair;
  context_t *ctx = p->ctx;
  if (--ctx->open_handles == 0 && ctx->env_gone) cleanup_done(ctx);
  pair_unref(p);
}

static void close_sides(pair_t *p) {
  side_t *sides[2] = {&p->client, &p->broker};
  for (int i = 0; i < 2; i++) {
    side_t *s = sides[i];
    if (!s->open) continue;
    s->open = 0;
    s->reading = 0;
    uv_close((uv_handle_t *)&s->tcp, on_handle_closed);
  }
}

/* A copy of `bytes` for JavaScript (undefined when there are none); napi_ok or the failure. */
static napi_status buffer_or_undefined(napi_env env, const uint8_t *bytes, size_t len, napi_value *v) {
  if (len == 0) return napi_get_undefined(env, v);
  void *data;
  return napi_create_buffer_copy(env, len, bytes, &data, v);
}

/* The requests awaiting their answers as a Float64Array of 5 numbers each, oldest first. */
static napi_status pending_array(napi_env env, const pair_t *p, napi_value *out) {
  napi_value ab;
  void *data = NULL;
  size_t n = p->pend_count;
  napi_status st = napi_create_arraybuffer(env, n * 5 * sizeof(double), &data, &ab);
  if (st != napi_ok) return st;
  if (n > 0 && data == NULL) return napi_generic_failure;
  double *d = data;
  for (size_t i = 0; i < n; i++) {
    const pending_t *e = &p->pend[(p->pend_first + i) % p->pend_cap];
    d[5 * i] = e->correlation_id;
    d[5 * i + 1] = e->api_key;
    d[5 * i + 2] = e->api_version;
    d[5 * i + 3] = e->plan;
    d[5 * i + 4] = e->started_ms;
  }
  return napi_create_typedarray(env, napi_float64_array, n * 5, ab, 0, out);
}

/* A Node-API failure injected by the tests (failNextHandback); never in the production build. */
static int injected_failure(context_t *ctx) {
#ifdef RELAY_TESTING_BUILD
  if (ctx->fail_next_handback) {
    ctx->fail_next_handback = 0;
    return 1;
  }
#endif
  (void)ctx;
  return 0;
}

/* Everything is at a boundary and written: JavaScript takes the pair over. */
static void maybe_handed_back(pair_t *p) {
  if (p->state != HANDING_BACK) return;
  if (!p->client.stopped || !p->broker.stopped || p->client.queued || p->broker.queued) return;
  context_t *ctx = p->ctx;
  if (ctx->disposed) {
    /* Nobody to hand it to (dispose, or the environment is going away). */
    p->state = DONE;
    close_sides(p);
    return;
  }
  napi_env env = ctx->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) {
    stop_with(p, CLOSED_NATIVE_FAILED, 0);
    return;
  }
  napi_value argv[4];
  /* Without any of these the pair cannot go back whole: it ends instead (CLOSED_NATIVE_FAILED). */
  if (injected_failure(ctx) || napi_create_int32(env, p->id, &argv[0]) != napi_ok ||
      buffer_or_undefined(env, p->client.left, p->client.left_len, &argv[1]) != napi_ok ||
      buffer_or_undefined(env, p->broker.left, p->broker.left_len, &argv[2]) != napi_ok ||
      pending_array(env, p, &argv[3]) != napi_ok) {
    (void)napi_close_handle_scope(env, scope);
    stop_with(p, CLOSED_NATIVE_FAILED, 0);
    return;
  }
  p->state = DONE;
  p->pend_count = 0;
  /* The duplicates close first: JavaScript reads the sockets again as soon as it is called. */
  close_sides(p);
  call_js(ctx, p, JS_CALLBACK, ctx->on_handback, 4, argv);
  (void)napi_close_handle_scope(env, scope);
}

/* The relay stops for good (an end or an error of a socket): JavaScript closes the connection. */
static void stop_with(pair_t *p, int reason, int uv_err) {
  if (p->state == DONE) return;
  p->state = DONE;
  close_sides(p);
  context_t *ctx = p->ctx;
  if (ctx->disposed) return;
  napi_env env = ctx->env;
  napi_handle_scope scope;
  /*
   * Should any of these fail, JavaScript is not told, and nothing better is possible: the report
   * itself is what failed. The pair is closed here all the same. Node-API fails here only when
   * the environment can no longer run JavaScript (it is being torn down).
   */
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value argv[3];
  napi_status st = napi_create_int32(env, p->id, &argv[0]);
  if (st == napi_ok) st = napi_create_int32(env, reason, &argv[1]);
  if (st == napi_ok) {
    if (uv_err < 0 && uv_err != UV_EOF) st = napi_create_string_utf8(env, uv_err_name(uv_err), NAPI_AUTO_LENGTH, &argv[2]);
    else st = napi_get_undefined(env, &argv[2]);
  }
  if (st == napi_ok) call_js(ctx, p, JS_CALLBACK, ctx->on_closed, 3, argv);
  (void)napi_close_handle_scope(env, scope);
}

/* ---- flow -------------------------------------------------------------------------------------- */

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  context_t *ctx = ((side_t *)h)->pair->ctx;
  buf->base = (char *)ctx->read_buffer;
  buf->len = READ_BYTES;
}

/*
 * Reads a side while the other side's socket takes what it is given (nothing queued for it), the
 * client only while fewer than --max-in-flight requests await answers; a stopped side not at all.
 */
static void update_reading(pair_t *p) {
  if (p->state == DONE) return;
  int client = !p->client.stopped && p->broker.queued == 0 && p->pend_count < p->ctx->max_in_flight;
  int broker = !p->broker.stopped && p->client.queued == 0;
  side_t *sides[2] = {&p->client, &p->broker};
  int want[2] = {client, broker};
  for (int i = 0; i < 2; i++) {
    side_t *s = sides[i];
    if (want[i] == s->reading) continue;
    int r = want[i] ? uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read) : uv_read_stop((uv_stream_t *)&s->tcp);
    if (r < 0) {
      stop_with(p, s->is_client ? CLOSED_CLIENT_ERROR : CLOSED_BROKER_ERROR, r);
      return;
    }
    s->reading = want[i];
  }
}

/* ---- client -> broker -------------------------------------------------------------------------- */

static int64_t classify(pair_t *p, const uint8_t *h, size_t len, pending_t *e) {
  return classify_request(p->ctx->plans, p->ctx->max_frame_size, h, len, e);
}

/* Takes a classified frame: its answer awaited (unless it gets none), its bytes passed on. */
static int take_request(pair_t *p, const pending_t *e) {
  if (e->plan == 0) return 1;
  pending_t entry = *e;
  entry.started_ms = now_ms(p->ctx);
  return pend_push(p, entry);
}

static void client_read(pair_t *p, const uint8_t *data, size_t n) {
  pieces_t out = {.n = 0};
  side_t *broker = &p->broker;
  size_t off = 0;
  while (off < n) {
    if (p->req_left > 0) {
      size_t k = (uint64_t)p->req_left < n - off ? (size_t)p->req_left : n - off;
      if (!add_piece(broker, &out, data + off, k)) return;
      off += k;
      p->req_left -= (int64_t)k;
      continue;
    }
    if (p->state != ENGAGED) {
      if (!send_pieces(broker, out.b, out.n)) return;
      stop_side(&p->client, p->req_head, p->req_head_len, data + off, n - off);
      p->req_head_len = 0;
      return;
    }
    pending_t e;
    int64_t total;
    if (p->req_head_len == 0) {
      total = classify(p, data + off, n - off, &e);
      if (total > p->ctx->stream_limit && total > (int64_t)(n - off)) total = HEAD_JS;
      if (total == HEAD_MORE) {
        if (n - off <= HEAD_MAX) {
          memcpy(p->req_head, data + off, n - off);
          p->req_head_len = n - off;
          off = n;
          break;
        }
        total = HEAD_JS;
      }
      if (total == HEAD_JS) {
        if (!send_pieces(broker, out.b, out.n)) return;
        stop_side(&p->client, NULL, 0, data + off, n - off);
        return;
      }
      if (!take_request(p, &e)) {
        stop_with(p, CLOSED_CLIENT_ERROR, UV_ENOMEM);
        return;
      }
      p->req_left = total;
      continue;
    }
    /* A frame's start held from earlier reads: add to it what classifying needs. */
    size_t room = HEAD_MAX - p->req_head_len;
    if (p->req_head_len >= 4) {
      int32_t size = be32(p->req_head);
      if (size >= 0) {
        int64_t total_known = 4 + (int64_t)size;
        if ((int64_t)p->req_head_len + (int64_t)room > total_known) room = (size_t)(total_known - (int64_t)p->req_head_len);
      }
    } else if (room > 4 - p->req_head_len) {
      room = 4 - p->req_head_len; /* the size prefix first, to know where the frame ends */
    }
    size_t k = room < n - off ? room : n - off;
    memcpy(p->req_head + p->req_head_len, data + off, k);
    p->req_head_len += k;
    off += k;
    total = classify(p, p->req_head, p->req_head_len, &e);
    if (total == HEAD_MORE && p->req_head_len >= HEAD_MAX) total = HEAD_JS;
    /* It spans reads: a large one is JavaScript's (stream_limit). */
    if (total > p->ctx->stream_limit) total = HEAD_JS;
    if (total == HEAD_MORE) continue;
    if (total == HEAD_JS) {
      if (!send_pieces(broker, out.b, out.n)) return;
      stop_side(&p->client, p->req_head, p->req_head_len, data + off, n - off);
      p->req_head_len = 0;
      return;
    }
    if (!take_request(p, &e)) {
      stop_with(p, CLOSED_CLIENT_ERROR, UV_ENOMEM);
      return;
    }
    /* The held bytes go first; they are copied if the kernel does not take them at once. */
    if (!add_piece(broker, &out, p->req_head, p->req_head_len)) return;
    p->req_left = total - (int64_t)p->req_head_len;
    p->req_head_len = 0;
    /* req_head is used again by the next frame of this read: write what refers to it now. */
    if (!send_pieces(broker, out.b, out.n)) return;
    out.n = 0;
  }
  if (!send_pieces(broker, out.b, out.n)) return;
  if (p->state != ENGAGED && p->req_left == 0 && !p->client.stopped) {
    stop_side(&p->client, p->req_head, p->req_head_len, NULL, 0);
    p->req_head_len = 0;
  }
}

/* ---- broker -> client -------------------------------------------------------------------------- */

/* The answer at the head has gone to the client whole. */
static void answer_done(pair_t *p) {
  answered(p, pend_head(p));
  pend_pop(p);
}

/*
 * Starts the answer whose first bytes are `h` (`len` >= 8 of them, size prefix included): 1 to
 * stream it, 0 when JavaScript must have it.
 */
static int answer_streams(pair_t *p, const uint8_t *h) {
  int32_t size = be32(h);
  if (size < 4 || size > p->ctx->max_frame_size) return 0;
  const pending_t *e = pend_head(p);
  if (e == NULL || be32(h + 4) != e->correlation_id) return 0;
  return 1;
}

static void broker_read(pair_t *p, const uint8_t *data, size_t n) {
  pieces_t out = {.n = 0};
  side_t *client = &p->client;
  size_t off = 0;
  while (off < n) {
    if (p->resp_left > 0) {
      size_t k = (uint64_t)p->resp_left < n - off ? (size_t)p->resp_left : n - off;
      if (!add_piece(client, &out, data + off, k)) return;
      off += k;
      p->resp_left -= (int64_t)k;
      if (p->resp_left == 0) answer_done(p);
      continue;
    }
    if (p->resp_whole != NULL) {
      /* A Produce answer gathered for its walk. */
      size_t k = p->resp_whole_size - p->resp_whole_len < n - off ? p->resp_whole_size - p->resp_whole_len : n - off;
      memcpy(p->resp_whole + p->resp_whole_len, data + off, k);
      p->resp_whole_len += k;
      off += k;
      if (p->resp_whole_len < p->resp_whole_size) continue;
      uint8_t *whole = p->resp_whole;
      size_t size = p->resp_whole_size;
      if (!produce_answer_unchanged(whole + 4, size - 4)) {
        p->resp_whole = NULL;
        if (!send_pieces(client, out.b, out.n)) {
          free(whole);
          return;
        }
        stop_side(&p->broker, whole, size, data + off, n - off);
        free(whole);
        return;
      }
      if (!add_piece(client, &out, whole, size) || !send_pieces(client, out.b, out.n)) {
        p->resp_whole = NULL;
        free(whole);
        return;
      }
      out.n = 0;
      p->resp_whole = NULL;
      free(whole);
      answer_done(p);
      continue;
    }
    if (p->state != ENGAGED) {
      if (!send_pieces(client, out.b, out.n)) return;
      stop_side(&p->broker, p->resp_head, p->resp_head_len, data + off, n - off);
      p->resp_head_len = 0;
      return;
    }
    const uint8_t *h;
    if (p->resp_head_len == 0 && n - off >= 8) {
      h = data + off;
    } else {
      size_t k = 8 - p->resp_head_len < n - off ? 8 - p->resp_head_len : n - off;
      memcpy(p->resp_head + p->resp_head_len, data + off, k);
      p->resp_head_len += k;
      off += k;
      if (p->resp_head_len < 8) continue;
      h = p->resp_head;
    }
    int held = h == p->resp_head;
    if (!answer_streams(p, h)) {
      if (!send_pieces(client, out.b, out.n)) return;
      if (held) stop_side(&p->broker, p->resp_head, 8, data + off, n - off);
      else stop_side(&p->broker, NULL, 0, data + off, n - off);
      p->resp_head_len = 0;
      return;
    }
    int64_t total = 4 + (int64_t)be32(h);
    if ((pend_head(p)->plan & PLAN_KIND) == PLAN_WALK) {
      /* The walk needs the whole answer: in this read, or gathered. */
      if (!held && (int64_t)(n - off) >= total) {
        if (!produce_answer_unchanged(data + off + 4, (size_t)total - 4)) {
          if (!send_pieces(client, out.b, out.n)) return;
          stop_side(&p->broker, NULL, 0, data + off, n - off);
          return;
        }
        if (!add_piece(client, &out, data + off, (size_t)total)) return;
        off += (size_t)total;
        answer_done(p);
        continue;
      }
      p->resp_whole = malloc((size_t)total);
      if (!p->resp_whole) {
        stop_with(p, CLOSED_BROKER_ERROR, UV_ENOMEM);
        return;
      }
      p->resp_whole_size = (size_t)total;
      if (held) {
        memcpy(p->resp_whole, p->resp_head, 8);
        p->resp_whole_len = 8;
        p->resp_head_len = 0;
      } else {
        p->resp_whole_len = 0;
      }
      continue;
    }
    if (held) {
      if (!add_piece(client, &out, p->resp_head, 8) || !send_pieces(client, out.b, out.n)) return;
      out.n = 0;
      p->resp_head_len = 0;
      p->resp_left = total - 8;
      if (p->resp_left == 0) answer_done(p);
    } else {
      p->resp_left = total;
    }
  }
  if (!send_pieces(client, out.b, out.n)) return;
  if (p->state != ENGAGED && p->resp_left == 0 && p->resp_whole == NULL && !p->broker.stopped) {
    stop_side(&p->broker, p->resp_head, p->resp_head_len, NULL, 0);
    p->resp_head_len = 0;
  }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  side_t *s = (side_t *)stream;
  pair_t *p = s->pair;
  if (p->state == DONE || nread == 0) return;
  if (nread < 0) {
    if (s->is_client) stop_with(p, nread == UV_EOF ? CLOSED_CLIENT_ENDED : CLOSED_CLIENT_ERROR, (int)nread);
    else stop_with(p, nread == UV_EOF ? CLOSED_BROKER_ENDED : CLOSED_BROKER_ERROR, (int)nread);
    return;
  }
  if (s->is_client) {
    p->last_active_ns = uv_hrtime();
    count_bytes(p->ctx, 1, (double)nread);
    client_read(p, (const uint8_t *)buf->base, (size_t)nread);
  } else {
    count_bytes(p->ctx, 3, (double)nread);
    broker_read(p, (const uint8_t *)buf->base, (size_t)nread);
  }
  update_reading(p);
  maybe_handed_back(p);
}

/* ---- lifetime ---------------------------------------------------------------------------------- */

static void pair_unref(pair_t *p) {
  if (--p->refs > 0) return;
  context_t *ctx = p->ctx;
  if (p->prev) p->prev->next = p->next;
  else ctx->first = p->next;
  if (p->next) p->next->prev = p->prev;
  free(p->pend);
  free(p->client.left);
  free(p->broker.left);
  free(p->resp_whole);
  free(p);
  ctx->pairs--;
  context_unref(ctx);
}

static void let_go_of_js(context_t *ctx) {
  if (ctx->disposed) return;
  ctx->disposed = 1;
  napi_env env = ctx->env;
  /* Letting go cannot be undone nor retried: a failure leaves the reference to the teardown. */
  (void)napi_delete_reference(env, ctx->on_handback);
  (void)napi_delete_reference(env, ctx->on_closed);
  (void)napi_delete_reference(env, ctx->on_stats);
  (void)napi_delete_reference(env, ctx->stats_ref);
  (void)napi_async_destroy(env, ctx->async);
}

static void context_unref(context_t *ctx) {
  if (!ctx->released || ctx->pairs > 0) return;
  let_go_of_js(ctx);
  cleanup_done(ctx);
  free(ctx);
}

/* The teardown hook is done with (every handle closed), or not needed (the context is freed). */
static void cleanup_done(context_t *ctx) {
  if (ctx->cleanup == NULL) return;
  (void)napi_remove_async_cleanup_hook(ctx->cleanup);
  ctx->cleanup = NULL;
}

/*
 * The environment is being torn down (process exit, a worker's end) with pairs maybe still
 * relaying: their handles are closed (Node waits for that until cleanup_done), nothing is
 * reported, the statistics array (soon freed) is not written. The memory goes with the
 * finalizers of the pairs' and the context's externals, which the teardown runs.
 */
static void on_env_teardown(napi_async_cleanup_hook_handle handle, void *arg) {
  (void)handle;
  context_t *ctx = arg;
  ctx->env_gone = 1;
  ctx->disposed = 1;
  for (pair_t *p = ctx->first; p != NULL; p = p->next) {
    if (p->state == DONE) continue;
    p->state = DONE;
    close_sides(p);
  }
  if (ctx->open_handles == 0) cleanup_done(ctx);
}

static void finalize_context(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  context_t *ctx = data;
  ctx->released = 1;
  context_unref(ctx);
}

static void finalize_pair(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  pair_t *p = data;
  /* JavaScript let go without closing: nothing more is reported. */
  if (p->state != DONE) {
    p->state = DONE;
    close_sides(p);
  }
  pair_unref(p);
}

/* ---- the JavaScript interface ------------------------------------------------------------------ */

/*
 * The externals handed to JavaScript carry these tags (Node-API 8): an object that is not the one
 * this file made, a pair passed as a context or the other way round, is refused with a TypeError,
 * never dereferenced.
 */
static const napi_type_tag CONTEXT_TAG = {0x6b6f702d72656c61ULL, 0x79636f6e74657874ULL};
static const napi_type_tag PAIR_TAG = {0x6b6f702d72656c61ULL, 0x7970616972000001ULL};

/* The data of an external made here with `tag`, or NULL with a TypeError thrown. */
static void *tagged(napi_env env, napi_value v, const napi_type_tag *tag, const char *expected) {
  bool ok = false;
  void *data = NULL;
  if (napi_check_object_type_tag(env, v, tag, &ok) != napi_ok || !ok || napi_get_value_external(env, v, &data) != napi_ok) {
    napi_throw_type_error(env, "KOP_NATIVE_RELAY", expected);
    return NULL;
  }
  return data;
}

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    if ((call) != napi_ok) {                                                                          \
      napi_throw_error(env, "KOP_NATIVE_RELAY", "native relay: " #call " failed");                  \
      return NULL;                                                                                    \
    }                                                                                                 \
  } while (0)

/* Lets go of what create_context made before it failed (the references are deleted if made). */
static void context_abandon(context_t *ctx) {
  napi_env env = ctx->env;
  napi_ref refs[4] = {ctx->on_handback, ctx->on_closed, ctx->on_stats, ctx->stats_ref};
  for (int i = 0; i < 4; i++)
    if (refs[i] != NULL) (void)napi_delete_reference(env, refs[i]);
  if (ctx->async != NULL) (void)napi_async_destroy(env, ctx->async);
  cleanup_done(ctx);
  free(ctx);
}

/* In create_context, once ctx is allocated: on failure, throw, free what was made, return. */
#define CHECK_CTX(call)                                                                               \
  do {                                                                                                \
    if ((call) != napi_ok) {                                                                          \
      napi_throw_error(env, "KOP_NATIVE_RELAY", "native relay: " #call " failed");                  \
      context_abandon(ctx);                                                                           \
      return NULL;                                                                                    \
    }                                                                                                 \
  } while (0)

/*
 * createContext(plans: Uint8Array(MAX_API * MAX_VERSION), maxFrameSize, maxInFlight, nowMs,
 *   onHandback, onClosed, onStats, stats: Float64Array, streamLimit) -> context
 */
static napi_value create_context(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 9) {
    napi_throw_type_error(env, NULL, "createContext: 9 arguments expected");
    return NULL;
  }
  napi_typedarray_type type;
  size_t len;
  void *data;
  CHECK(napi_get_typedarray_info(env, argv[0], &type, &len, &data, NULL, NULL));
  if (type != napi_uint8_array || len != MAX_API * MAX_VERSION) {
    napi_throw_type_error(env, NULL, "createContext: plans must be a Uint8Array of 4096");
    return NULL;
  }
  napi_typedarray_type stats_type;
  size_t stats_len;
  void *stats;
  CHECK(napi_get_typedarray_info(env, argv[7], &stats_type, &stats_len, &stats, NULL, NULL));
  if (stats_type != napi_float64_array || stats_len < STATS_HEADER + 3 * STATS_SAMPLES) {
    napi_throw_type_error(env, NULL, "createContext: stats must be a Float64Array of 12296");
    return NULL;
  }
  context_t *ctx = calloc(1, sizeof(context_t));
  if (!ctx) {
    napi_throw_error(env, NULL, "createContext: out of memory");
    return NULL;
  }
  ctx->env = env;
  memcpy(ctx->plans, data, sizeof ctx->plans);
  ctx->stats = stats;
  uint32_t in_flight;
  double js_now;
  CHECK_CTX(napi_get_value_int32(env, argv[1], &ctx->max_frame_size));
  CHECK_CTX(napi_get_value_int32(env, argv[8], &ctx->stream_limit));
  CHECK_CTX(napi_get_value_uint32(env, argv[2], &in_flight));
  CHECK_CTX(napi_get_value_double(env, argv[3], &js_now));
  ctx->max_in_flight = in_flight;
  ctx->clock_offset_ms = js_now - (double)uv_hrtime() / 1e6;
  CHECK_CTX(napi_create_reference(env, argv[4], 1, &ctx->on_handback));
  CHECK_CTX(napi_create_reference(env, argv[5], 1, &ctx->on_closed));
  CHECK_CTX(napi_create_reference(env, argv[6], 1, &ctx->on_stats));
  CHECK_CTX(napi_create_reference(env, argv[7], 1, &ctx->stats_ref));
  napi_value name;
  CHECK_CTX(napi_create_string_utf8(env, "kop.nativeRelay", NAPI_AUTO_LENGTH, &name));
  CHECK_CTX(napi_async_init(env, NULL, name, &ctx->async));
  CHECK_CTX(napi_add_async_cleanup_hook(env, on_env_teardown, ctx, &ctx->cleanup));
  napi_value out;
  CHECK_CTX(napi_create_external(env, ctx, finalize_context, NULL, &out));
  /* From here the external owns ctx: its finalizer frees it, whatever happens next. */
  CHECK(napi_type_tag_object(env, out, &CONTEXT_TAG));
  return out;
}

static int open_side(pair_t *p, side_t *s, int fd, int is_client) {
  s->pair = p;
  s->is_client = is_client;
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(p->ctx->env, &loop) != napi_ok) return UV_EINVAL;
  int r = uv_tcp_init(loop, &s->tcp);
  if (r < 0) return r;
  s->open = 1;
  p->refs++;
  p->ctx->open_handles++;
  int copy = dup(fd);
  if (copy < 0) return uv_translate_sys_error(errno);
  r = uv_tcp_open(&s->tcp, copy);
  if (r < 0) close(copy);
  return r;
}

/*
 * attach(context, id, clientFd, brokerFd, pending: Float64Array of (correlation id, api key,
 *   version, plan, started ms) per request awaiting its answer, oldest first) -> pair
 * Throws when the sockets cannot be taken; nothing was read then.
 */
static napi_value attach(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 5) {
    napi_throw_type_error(env, NULL, "attach: 5 arguments expected");
    return NULL;
  }
  context_t *ctx = tagged(env, argv[0], &CONTEXT_TAG, "attach: a native relay context expected");
  if (ctx == NULL) return NULL;
  if (ctx->disposed) {
    napi_throw_error(env, "KOP_NATIVE_RELAY", "attach: the context is disposed");
    return NULL;
  }
  int32_t id, client_fd, broker_fd;
  CHECK(napi_get_value_int32(env, argv[1], &id));
  CHECK(napi_get_value_int32(env, argv[2], &client_fd));
  CHECK(napi_get_value_int32(env, argv[3], &broker_fd));
  napi_typedarray_type type;
  size_t len;
  void *data;
  CHECK(napi_get_typedarray_info(env, argv[4], &type, &len, &data, NULL, NULL));
  if (type != napi_float64_array || len % 5 != 0) {
    napi_throw_type_error(env, NULL, "attach: pending must be a Float64Array of 5 numbers per request");
    return NULL;
  }
  pair_t *p = calloc(1, sizeof(pair_t));
  if (!p) {
    napi_throw_error(env, NULL, "attach: out of memory");
    return NULL;
  }
  p->ctx = ctx;
  p->id = id;
  p->state = ENGAGED;
  p->refs = 1; /* JavaScript's */
  p->last_active_ns = uv_hrtime();
  ctx->pairs++;
  p->next = ctx->first;
  if (p->next) p->next->prev = p;
  ctx->first = p;
  const double *d = data;
  int ok = 1;
  for (size_t i = 0; i < len / 5 && ok; i++) {
    pending_t e = {(int32_t)d[5 * i], (int16_t)d[5 * i + 1], (int16_t)d[5 * i + 2], (uint8_t)d[5 * i + 3], d[5 * i + 4]};
    ok = pend_push(p, e);
  }
  int r = ok ? open_side(p, &p->client, client_fd, 1) : UV_ENOMEM;
  if (r >= 0) r = open_side(p, &p->broker, broker_fd, 0);
  if (r >= 0) {
    update_reading(p);
    if (p->state == DONE) r = UV_EIO;
  }
  if (r < 0) {
    p->state = DONE;
    close_sides(p);
    pair_unref(p);
    napi_throw_error(env, uv_err_name(r), "attach: the sockets could not be taken");
    return NULL;
  }
  napi_value out;
  if (napi_create_external(env, p, finalize_pair, NULL, &out) != napi_ok) {
    p->state = DONE;
    close_sides(p);
    pair_unref(p);
    napi_throw_error(env, "KOP_NATIVE_RELAY", "attach: napi_create_external failed");
    return NULL;
  }
  if (napi_type_tag_object(env, out, &PAIR_TAG) != napi_ok) {
    /* The external's finalizer lets go of the pair; it must not relay unowned meanwhile. */
    p->state = DONE;
    close_sides(p);
    napi_throw_error(env, "KOP_NATIVE_RELAY", "attach: napi_type_tag_object failed");
    return NULL;
  }
  return out;
}

static pair_t *pair_arg(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) {
    napi_throw_type_error(env, "KOP_NATIVE_RELAY", "a native relay pair expected");
    return NULL;
  }
  return tagged(env, argv[0], &PAIR_TAG, "a native relay pair expected");
}

/* handBack(pair): stop at the next frame boundaries and call onHandback (later, or from here). */
static napi_value hand_back(napi_env env, napi_callback_info info) {
  pair_t *p = pair_arg(env, info);
  if (p) start_handback(p);
  return NULL;
}

/* close(pair): stop now, nothing more is reported; queued writes are dropped. */
static napi_value close_pair(napi_env env, napi_callback_info info) {
  pair_t *p = pair_arg(env, info);
  if (p && p->state != DONE) {
    p->state = DONE;
    close_sides(p);
  }
  return NULL;
}

/*
 * dispose(context): lets go of the callbacks and the statistics array (which refer back to the
 * JavaScript object that holds the context: without this, neither could ever be collected).
 * Pairs still attached are relayed on, and report nothing more.
 */
static napi_value dispose(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1) {
    napi_throw_type_error(env, "KOP_NATIVE_RELAY", "dispose: a native relay context expected");
    return NULL;
  }
  context_t *ctx = tagged(env, argv[0], &CONTEXT_TAG, "dispose: a native relay context expected");
  if (ctx != NULL) let_go_of_js(ctx);
  return NULL;
}

/* status(pair) -> [ms since the client's last read or write, requests awaiting, bytes unsent to the client] */
static napi_value status(napi_env env, napi_callback_info info) {
  pair_t *p = pair_arg(env, info);
  if (!p) return NULL;
  napi_value arr, v;
  CHECK(napi_create_array_with_length(env, 3, &arr));
  CHECK(napi_create_double(env, (double)(uv_hrtime() - p->last_active_ns) / 1e6, &v));
  CHECK(napi_set_element(env, arr, 0, v));
  CHECK(napi_create_uint32(env, p->pend_count, &v));
  CHECK(napi_set_element(env, arr, 1, v));
  CHECK(napi_create_double(env, (double)p->client.queued, &v));
  CHECK(napi_set_element(env, arr, 2, v));
  return arr;
}

#ifdef RELAY_TESTING_BUILD
/*
 * Only in the test build (scripts/build-native.mjs --testing, -DRELAY_TESTING_BUILD), for the tests
 * that hold these against the JavaScript walkers (produce-endpoints.ts, frames.ts
 * peekProduceAcks): produceAnswerUnchanged(payload) -> boolean,
 * produceAcks(payload, version, flexible) -> acks, -2 (more bytes needed) or -3 (unreadable);
 * and failNextHandback, for the path a Node-API failure takes.
 */
static napi_value test_produce_answer_unchanged(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  void *data;
  size_t len;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  CHECK(napi_get_buffer_info(env, argv[0], &data, &len));
  CHECK(napi_get_boolean(env, produce_answer_unchanged(data, len), &out));
  return out;
}

static napi_value test_produce_acks(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], out;
  void *data;
  size_t len;
  int32_t version;
  bool flexible;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  CHECK(napi_get_buffer_info(env, argv[0], &data, &len));
  CHECK(napi_get_value_int32(env, argv[1], &version));
  CHECK(napi_get_value_bool(env, argv[2], &flexible));
  if (len < 8) return NULL;
  CHECK(napi_create_int32(env, produce_acks(data, len, (int16_t)version, flexible), &out));
  return out;
}

/* failNextHandback(context): the next handback of the context fails as a Node-API call would. */
static napi_value test_fail_next_handback(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  context_t *ctx = argc < 1 ? NULL : tagged(env, argv[0], &CONTEXT_TAG, "a native relay context expected");
  if (ctx != NULL) ctx->fail_next_handback = 1;
  return NULL;
}
#endif

/* The module's exports; a failure here fails the require() with the exception thrown. */
static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"createContext", NULL, create_context, NULL, NULL, NULL, napi_default, NULL},
      {"attach", NULL, attach, NULL, NULL, NULL, napi_default, NULL},
      {"handBack", NULL, hand_back, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, close_pair, NULL, NULL, NULL, napi_default, NULL},
      {"status", NULL, status, NULL, NULL, NULL, napi_default, NULL},
      {"dispose", NULL, dispose, NULL, NULL, NULL, napi_default, NULL},
#ifdef RELAY_TESTING_BUILD
      {"produceAnswerUnchanged", NULL, test_produce_answer_unchanged, NULL, NULL, NULL, napi_default, NULL},
      {"produceAcks", NULL, test_produce_acks, NULL, NULL, NULL, napi_default, NULL},
      {"failNextHandback", NULL, test_fail_next_handback, NULL, NULL, NULL, napi_default, NULL},
#endif
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  const struct {
    const char *name;
    uint32_t value;
  } constants[] = {{"maxApi", MAX_API}, {"maxVersion", MAX_VERSION}, {"statsHeader", STATS_HEADER}, {"statsSamples", STATS_SAMPLES}};
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
    napi_value v;
    CHECK(napi_create_uint32(env, constants[i].value, &v));
    CHECK(napi_set_named_property(env, exports, constants[i].name, v));
  }
  return exports;
}

NAPI_MODULE_INIT() { return init(env, exports); }
