/* tests/tools/watchends.c - print the ends a watch gets, one line each
 *
 *   watchends DIR [--token T [--resume SEQ]] [--timeout S] ID... | --all
 *   watchends DIR --after SEQ [--timeout S] ID...
 *
 * DIR is a pilot's directory (its endpoint and keys/).  The first form
 * watches the tasks through client/sub.c, as pilot wait does (it resumes
 * across reconnects and a restarted pilotd, and follows the endpoint
 * file to a new one), and exits 0 once pilotd
 * says none is pending; with --token it uses that token, and with
 * --resume it comes back to that watch after SEQ, as a client that was
 * killed does (pl_sub_resume()).  The second sends one WATCH with
 * 'after' itself and prints what is pushed (a replay from the
 * database) until nothing is pending and nothing came for a second.  Each end is a line
 * "SEQ ID STATE"; exit 1 on an error, 2 when --timeout (default 600 s)
 * passed.  tests/e2e/t1100-watch.sh runs it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/sub.h"
#include "proto/keys.h"
#include "proto/pilotdir.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "proto/watchmsg.h"

static void print_end(const struct pl_end *e)
{
    printf("%llu %llu %s\n", (unsigned long long)e->seq,
           (unsigned long long)e->id, pl_state_name(e->state));
    fflush(stdout);
}

static void end_cb(struct pl_sub *s, const struct pl_end *e, void *arg)
{
    (void)s;
    (void)arg;
    print_end(e);
}

/* The raw form's pushes. */
struct raw {
    uint64_t pending;
    double last;
};

static void raw_push(struct pl_rpc *r, const struct pl_msg *m, void *arg)
{
    struct raw *w = arg;
    struct pl_ends e;
    struct pl_error err;
    (void)r;

    if (m->type != PL_MSG_ENDS || pl_ends_decode(m->body, &e, &err) < 0)
        return;
    for (uint32_t i = 0; i < e.nends; i++)
        print_end(&e.ends[i]);
    w->pending = e.pending;
    w->last = pl_mono();
    pl_ends_clear(&e);
}

int main(int argc, char **argv)
{
    struct pl_endpoint ep;
    struct pl_keys_peer keys;
    struct pl_error err;
    struct pl_rpc *rpc;
    struct pl_sel_req sel = { 0 };
    char kdir[PL_PATH_MAX + 16];
    double limit = 600, after = -1, resume = -1;
    const char *token = NULL;
    bool all = false;
    int i;

    if (argc < 3) {
        fprintf(stderr, "usage: watchends DIR [--after SEQ] [--timeout S] "
                        "ID... | --all\n");
        return 1;
    }
    sel.ids = calloc((size_t)argc, sizeof(*sel.ids));
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--all"))
            all = true;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            limit = atof(argv[++i]);
        else if (!strcmp(argv[i], "--after") && i + 1 < argc)
            after = atof(argv[++i]);
        else if (!strcmp(argv[i], "--resume") && i + 1 < argc)
            resume = atof(argv[++i]);
        else if (!strcmp(argv[i], "--token") && i + 1 < argc)
            token = argv[++i];
        else
            sel.ids[sel.nids++] = strtoull(argv[i], NULL, 10);
    }
    pl_keys_path(argv[1], kdir, sizeof(kdir));
    if (pl_endpoint_read(argv[1], &ep, &err) < 0
        || pl_keys_load_peer(kdir, "client", &keys, &err) < 0
        || !(rpc = pl_rpc_new(ep.client, &keys, &err))) {
        fprintf(stderr, "watchends: %s\n", err.text);
        return 1;
    }
    double end = pl_mono() + limit;
    int rc = 2;
    if (after >= 0) {
        struct raw w = { UINT64_MAX, pl_mono() };
        struct pl_watch_req q = { .token = "watchends-raw-token-0",
                                  .attach = true, .has_after = true,
                                  .after = (uint64_t)after, .sel = sel };
        struct pl_wbuf b;
        struct pl_msg reply;
        const msgpack_object *data;
        pl_rpc_set_push(rpc, raw_push, NULL, &w);
        pl_watch_req_encode(&b, pl_rpc_seq(rpc), &q);
        if (pl_rpc_call(rpc, &b, 10000, &reply, &data, &err) < 0) {
            fprintf(stderr, "watchends: %s\n", err.text);
            return 1;
        }
        pl_wbuf_destroy(&b);
        pl_msg_release(&reply);
        while (pl_mono() < end) {
            pl_rpc_wait(rpc, 200);
            if (w.pending == 0 && pl_mono() - w.last >= 1.0) {
                rc = 0;
                break;
            }
        }
        pl_rpc_free(rpc);
        free(sel.ids);
        return rc;
    }
    struct pl_sub *s = pl_sub_new(rpc, token, 10000, end_cb, NULL, &err);
    if (!s
        || (resume >= 0 ? pl_sub_resume(s, (uint64_t)resume, &sel, all, &err)
                        : pl_sub_add(s, &sel, all, &err)) < 0) {
        fprintf(stderr, "watchends: %s\n", err.text);
        return 1;
    }
    while (pl_mono() < end) {
        if (pl_sub_pending(s) == 0) {
            rc = 0;
            break;
        }
        if (pl_sub_wait(s, 1000, &err) < 0) {
            struct pl_endpoint now;
            struct pl_rpc *moved;
            fprintf(stderr, "watchends: %s (asking again)\n", err.text);
            /* a local pilot's pilotd started again listens elsewhere */
            if (pl_endpoint_read(argv[1], &now, NULL) == 0
                && strcmp(now.client, ep.client)
                && (moved = pl_rpc_new(now.client, &keys, &err))) {
                pl_sub_set_rpc(s, moved);
                pl_rpc_free(rpc);
                rpc = moved;
                ep = now;
            }
        }
    }
    if (rc == 0)
        pl_sub_unwatch(s, &err);
    pl_sub_free(s);
    pl_rpc_free(rpc);
    free(sel.ids);
    return rc;
}
