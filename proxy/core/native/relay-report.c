/*
 * What the relay tells JavaScript, and how: the statistics for its metrics, the reservations of
 * large requests in the request memory pool, the pair handed back at frame boundaries, the ends.
 * THE RULE FOR CALLING JAVASCRIPT is here, above call_js, the one place that calls it.
 */
#include "relay.h"

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
 *     taken, answered(); a large request's reservation is asked for or let go, reserve_request):
 *     no tick or microtask runs in it, and the callbacks (flushStats, reserve) read the statistics
 *     array or count in the request memory pool, and touch no pair (the pool admits connections
 *     it muted on a later turn, setImmediate).
 *   - Nothing is called once the context is disposed or the environment is being torn down.
 * call_js is the only place that calls JavaScript; it refuses anything else.
 */
enum js_call { JS_PLAIN, JS_CALLBACK };

/* The callback's result in *result (NULL when nothing was called or it threw); napi_ok if called. */
static napi_status call_js(context_t *ctx, const pair_t *p, enum js_call how, napi_ref fn_ref, size_t argc, napi_value *argv,
                           napi_value *result) {
  napi_env env = ctx->env;
  napi_value fn, global, ignored;
  if (result == NULL) result = &ignored;
  *result = NULL;
  if (how == JS_CALLBACK && (p == NULL || p->state != DONE)) abort(); /* a bug here, not a runtime condition */
  if (ctx->disposed || napi_get_reference_value(env, fn_ref, &fn) != napi_ok || fn == NULL) return napi_generic_failure;
  if (napi_get_global(env, &global) != napi_ok) return napi_generic_failure;
  napi_status st = how == JS_CALLBACK ? napi_make_callback(env, ctx->async, global, fn, argc, argv, result)
                                      : napi_call_function(env, global, fn, argc, argv, result);
  if (st != napi_ok) {
    *result = NULL;
    rethrow_pending(env);
  }
  return st;
}

void count_bytes(context_t *ctx, int slot, double n) {
  if (!ctx->disposed) ctx->stats[slot] += n;
}

void answered(pair_t *p, const pending_t *e) {
  context_t *ctx = p->ctx;
  if (ctx->disposed) return;
  double *s = ctx->stats;
  size_t i = (size_t)s[0];
  if (i >= STATS_SAMPLES) {
    /* The pair is relaying, mid-read: a plain call (see call_js). */
    napi_env env = ctx->env;
    napi_handle_scope scope;
    if (napi_open_handle_scope(env, &scope) != napi_ok) return; /* the sample is lost */
    call_js(ctx, p, JS_PLAIN, ctx->on_stats, 0, NULL, NULL);
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

/* ---- reservations in the request memory pool ----------------------------------------------------- */

/* A plain call of on_reserve(id, bytes); 1 when it answered true. */
static int call_reserve(pair_t *p, double bytes) {
  context_t *ctx = p->ctx;
  napi_env env = ctx->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return 0;
  napi_value argv[2], result;
  bool yes = false;
  if (napi_create_int32(env, p->id, &argv[0]) == napi_ok && napi_create_double(env, bytes, &argv[1]) == napi_ok &&
      call_js(ctx, p, JS_PLAIN, ctx->on_reserve, 2, argv, &result) == napi_ok && result != NULL)
    (void)napi_get_value_bool(env, result, &yes);
  (void)napi_close_handle_scope(env, scope);
  return yes;
}

/*
 * Asks the request memory pool to reserve `size` bytes for the request about to be passed on as
 * its bytes arrive: 1 when reserved (held in p->reserved until release_request), 0 when the pool
 * is exhausted (or the call failed): the request is then JavaScript's. With the context disposed
 * there is no pool to ask (nothing is reported any more): the request goes on.
 */
int reserve_request(pair_t *p, int64_t size) {
  if (p->ctx->disposed) return 1;
  if (!call_reserve(p, (double)size)) return 0;
  p->reserved = size;
  return 1;
}

/* The reserved request's last byte is passed on: its reservation goes back to the pool. */
void release_request(pair_t *p) {
  int64_t size = p->reserved;
  if (size == 0) return;
  p->reserved = 0;
  /* JavaScript lets go of what a pair held when it ends in any case (native-relay.ts). */
  if (!p->ctx->disposed) (void)call_reserve(p, -(double)size);
}

/* ---- a Fetch answer's NodeEndpoints ------------------------------------------------------------ */

/*
 * A plain call of on_fetch_tail(id, section, version) (see call_js): JavaScript rewrites the
 * NodeEndpoints in a streamed Fetch answer's top-level tagged fields to the proxy's addresses,
 * or drops them, in exactly as many bytes (fetch-stream.ts rewriteFetchTail), which replace
 * `section` here. 1 when it did; 0 when it refused them (malformed) or could not be asked.
 */
int rewrite_fetch_tail(pair_t *p, uint8_t *section, size_t len, int16_t version) {
  context_t *ctx = p->ctx;
  if (ctx->disposed) return 0;
  napi_env env = ctx->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return 0;
  napi_value argv[3], result;
  void *copy, *data = NULL;
  size_t got = 0;
  bool is_buffer = false;
  int ok = napi_create_int32(env, p->id, &argv[0]) == napi_ok &&
           napi_create_buffer_copy(env, len, section, &copy, &argv[1]) == napi_ok &&
           napi_create_int32(env, version, &argv[2]) == napi_ok &&
           call_js(ctx, p, JS_PLAIN, ctx->on_fetch_tail, 3, argv, &result) == napi_ok && result != NULL &&
           napi_is_buffer(env, result, &is_buffer) == napi_ok && is_buffer &&
           napi_get_buffer_info(env, result, &data, &got) == napi_ok && got == len;
  if (ok) memcpy(section, data, len);
  (void)napi_close_handle_scope(env, scope);
  return ok;
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
void stop_side(side_t *s, const uint8_t *held, size_t held_len, const uint8_t *rest, size_t rest_len) {
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

void start_handback(pair_t *p) {
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

void cleanup_done(context_t *ctx);

static void on_handle_closed(uv_handle_t *h) {
  pair_t *p = ((side_t *)h)->pair;
  context_t *ctx = p->ctx;
  if (--ctx->open_handles == 0 && ctx->env_gone) cleanup_done(ctx);
  pair_unref(p);
}

void close_sides(pair_t *p) {
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
void maybe_handed_back(pair_t *p) {
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
  call_js(ctx, p, JS_CALLBACK, ctx->on_handback, 4, argv, NULL);
  (void)napi_close_handle_scope(env, scope);
}

/* The relay stops for good (an end or an error of a socket): JavaScript closes the connection. */
void stop_with(pair_t *p, int reason, int uv_err) {
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
  if (st == napi_ok) call_js(ctx, p, JS_CALLBACK, ctx->on_closed, 3, argv, NULL);
  (void)napi_close_handle_scope(env, scope);
}

