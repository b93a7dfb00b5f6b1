/* trainer_checkpoint.c: the trainer's checkpoint payload: what a run's state is on disk
 * (the layout below), written by rank 0 from every rank's env records, and read back on
 * resume (each rank its own envs) or, head only, for a policy to act. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "base/testing.h"
#include "records/checkpoint.h"
#include "training/trainer_checkpoint.h"
#include "training/trainer_config.h"

/* Payload: "META" (layout, iteration, env steps, episodes, envs, and the head's size:
 * the bytes up to the first env record), the algorithm's own sections, "ENVS" with the
 * record size, then one record per env in global order (the env's, then the
 * algorithm's). The records, which hold SAC's replay buffer, travel between the
 * processes and the file in chunks (chunk_envs), so no process ever holds all of them. */
#define CKPT_LAYOUT_VERSION 2u
#define META_BYTES 48   /* "META", u32 layout, i64 x 3, u64 envs, u64 head size */
#define MAX_HEAD_BYTES ((uint64_t)1 << 32) /* the head is parameters, not replay */

static size_t env_record_size(const trainer_ckpt_view *v) {
    return vec_env_record_size(v->ve) + v->ops->env_record_size(v->algo);
}

/* Envs per chunk of records: about 64 MiB, at least one env. The ckpt_chunk_envs test
 * hook sets it (tests make chunks small to exercise their edges); the bytes never depend
 * on it. */
static int chunk_envs(size_t rec) {
    int k = testing_hooks_get()->ckpt_chunk_envs;
    if (k >= 1) return k;
    size_t per = ((size_t)64 << 20) / (rec ? rec : 1);
    return per < 1 ? 1 : per > INT32_MAX ? INT32_MAX : (int)per;
}

/* This process's envs within [c0, c1): [*lo, *hi) as local indices. */
static void overlap(const trainer_ckpt_view *v, int c0, int c1, int *lo, int *hi) {
    int a = v->begin > c0 ? v->begin : c0, b = v->begin + v->count < c1 ? v->begin + v->count : c1;
    *lo = a - v->begin;
    *hi = (b > a ? b : a) - v->begin;
}

int trainer_checkpoint_write(const trainer_ckpt_view *v, const trainer_counters *n,
                             calf_error *err) {
    bool main = comm_is_main(v->c);
    size_t rec = env_record_size(v), vrec = vec_env_record_size(v->ve);
    int per = chunk_envs(rec);
    ckpt_writer w;
    int wrc = CALF_OK; /* the file's status, rank 0's; the gathers go on regardless */
    bool open = false;
    char dir[4096], path[4200];
    /* the chunk buffers before the temporary file: running out of memory then leaves
     * nothing half-written. A rank without them fails before the gathers; the job's other
     * ranks then see it leave, as any failed rank. */
    int span = per < v->E ? per : v->E;
    calf_error merr;
    calf_error_clear(&merr);
    unsigned char *local = mem_calloc((size_t)span, rec, &merr); /* this process's part of a chunk */
    unsigned char *all = main ? mem_calloc((size_t)span, rec, &merr) : NULL;
    bool have = local && (all || !main);
    if (!have) {
        free(local);
        free(all);
        *err = merr;
        return CALF_ENOMEM;
    }
    if (main) {
        ckpt_buf b;
        ckpt_buf_init(&b);
        ckpt_put_tag(&b, "META");
        ckpt_put_u32(&b, CKPT_LAYOUT_VERSION);
        ckpt_put_i64(&b, n->iteration);
        ckpt_put_i64(&b, n->env_steps);
        ckpt_put_i64(&b, n->total_episodes);
        ckpt_put_u64(&b, (uint64_t)v->E);
        ckpt_put_u64(&b, 0); /* the head's size, filled in below */
        v->ops->save(v->algo, &b);
        ckpt_put_tag(&b, "ENVS");
        ckpt_put_u64(&b, rec);
        if (b.failed) wrc = calf_error_set(err, CALF_ENOMEM, "out of memory building checkpoint "
                                           "%lld's head", (long long)n->iteration);
        else bytes_put_le(b.data + META_BYTES - 8, (uint64_t)b.len, 8);
        if (wrc == CALF_OK) wrc = fs_join(dir, sizeof dir, v->root, "train/algorithm", err);
        if (wrc == CALF_OK) wrc = ckpt_path(path, sizeof path, dir, n->iteration, err);
        if (wrc == CALF_OK)
            wrc = ckpt_writer_open(&w, path, v->digest, n->iteration,
                                   (uint64_t)b.len + (uint64_t)v->E * rec, err);
        open = wrc == CALF_OK;
        if (open) wrc = ckpt_writer_put(&w, b.data, b.len, err);
        open = wrc == CALF_OK;
        ckpt_buf_free(&b);
    }
    int rc = CALF_OK;
    for (int c0 = 0; c0 < v->E && rc == CALF_OK; c0 += per) {
        int c1 = v->E - c0 > per ? c0 + per : v->E, lo, hi;
        overlap(v, c0, c1, &lo, &hi);
        for (int e = lo; e < hi; e++) {
            unsigned char *p = local + (size_t)(e - lo) * rec;
            vec_env_save_record(v->ve, e, p);
            v->ops->save_env(v->algo, e, p + vrec);
        }
        rc = comm_gather_records(v->c, local, rec, hi - lo, c1 - c0, all, err);
        if (rc == CALF_OK && open) {
            wrc = ckpt_writer_put(&w, all, (size_t)(c1 - c0) * rec, err);
            open = wrc == CALF_OK;
        }
    }
    free(local);
    free(all);
    if (open) {
        if (rc == CALF_OK) wrc = ckpt_writer_commit(&w, err);
        else ckpt_writer_abort(&w);
    }
    if (rc == CALF_OK) rc = wrc;
    if (rc == CALF_OK && main) {
        rank_log_printf(v->log, false, "checkpoint %s", path);
        /* the new checkpoint is safe; failing to remove an old one only costs disk */
        int64_t keep = v->keep;
        calf_error perr;
        if (ckpt_prune(dir, keep > 0 ? (int)keep : 1, n->iteration, &perr) != CALF_OK)
            rank_log_printf(v->log, true, "warning: %s", perr.msg);
    }
    return rc;
}

#define MAX_ITERATION 1000000000000LL /* TrainerConfig.num_iterations' bound */

typedef struct ckpt_meta {
    int64_t iteration, env_steps, total_episodes;
    uint64_t num_envs, head_bytes;
} ckpt_meta;

/* *out = a * b for a, b >= 0; false when the product does not fit. */
static bool mul_fits(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b > 0 && a > INT64_MAX / b)) return false;
    *out = a * b;
    return true;
}

/* The head of checkpoint `path` (validated before: ckpt_read_head): META's size field,
 * then that many bytes. *head is malloc'd, the caller frees it. */
static int read_head(const char *path, const ckpt_header *hdr, unsigned char **head,
                     size_t *n, calf_error *err) {
    unsigned char meta[META_BYTES];
    *head = NULL;
    *n = 0;
    if (hdr->payload_size < META_BYTES)
        return calf_error_set(err, CALF_EINVAL, "%s: payload too short for its META section", path);
    int rc = ckpt_read_range(path, 0, meta, sizeof meta, err);
    if (rc) return rc;
    uint64_t hb = bytes_get_le(meta + META_BYTES - 8, 8);
    if (hb < META_BYTES || hb > hdr->payload_size || hb > MAX_HEAD_BYTES)
        return calf_error_set(err, CALF_EINVAL, "%s: head of %llu bytes in a %llu-byte payload",
                              path, (unsigned long long)hb,
                              (unsigned long long)hdr->payload_size);
    *head = mem_alloc((size_t)hb, err);
    if (!*head) return CALF_ENOMEM;
    *n = (size_t)hb;
    rc = ckpt_read_range(path, 0, *head, (size_t)hb, err);
    if (rc) {
        free(*head);
        *head = NULL;
    }
    return rc;
}

/* The META section and the algorithm's sections that follow it, checked against the
 * file header's iteration (a file pieced together from two checkpoints fails here) and
 * against the config: E envs, T steps each per iteration. */
static int read_meta_algo(ckpt_reader *r, const char *name, int64_t header_iteration, int E,
                          int T, ckpt_meta *m, const algorithm_ops *ops, algorithm *algo,
                          calf_error *err) {
    uint32_t layout = 0;
    ckpt_get_tag(r, "META");
    ckpt_get_u32(r, &layout);
    if (r->status == CALF_OK && layout != CKPT_LAYOUT_VERSION)
        return calf_error_set(err, CALF_EINVAL, "%s: unsupported checkpoint layout %u", name, layout);
    ckpt_get_i64(r, &m->iteration);
    ckpt_get_i64(r, &m->env_steps);
    ckpt_get_i64(r, &m->total_episodes);
    ckpt_get_u64(r, &m->num_envs);
    ckpt_get_u64(r, &m->head_bytes);
    if (r->status) return r->status;
    if (m->iteration != header_iteration)
        return calf_error_set(err, CALF_EINVAL, "%s: iteration %lld inside, %lld in the header", name,
                              (long long)m->iteration, (long long)header_iteration);
    if (m->iteration < 0 || m->iteration > MAX_ITERATION || m->env_steps < 0 ||
        m->total_episodes < 0 || m->total_episodes > m->env_steps)
        return calf_error_set(err, CALF_EINVAL, "%s: counters out of range", name);
    if (m->num_envs != (uint64_t)E)
        return calf_error_set(err, CALF_EINVAL, "%s: checkpoint has %llu environments, config %d",
                              name, (unsigned long long)m->num_envs, E);
    /* the counters follow from the iteration; anything else is a damaged or foreign file
     * (an iteration whose counters would not fit in 64 bits is one too) */
    int64_t want_steps;
    if (!mul_fits(m->iteration, (int64_t)E * T, &want_steps) || m->env_steps != want_steps)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", name,
                              (long long)m->iteration);
    return ops->load(algo, r, m->iteration, err);
}

/* A plug-in's env whose checkpoint does not load was most likely rebuilt with other
 * spaces (the config's digest cannot see them): say so first, the reader's detail after. */
static void plugin_hint(const char *env_name, calf_error *err) {
    const calf_env_class *cls = calf_env_find(env_name);
    const char *lib = cls ? calf_env_class_library(cls) : NULL;
    if (!lib) return;
    char detail[sizeof err->msg];
    snprintf(detail, sizeof detail, "%s", err->msg);
    const calf_env_spec *sp = &cls->spec;
    calf_error_set(err, CALF_EINVAL,
                   "the checkpoint does not fit environment '%s' of plug-in %s as it is now "
                   "(observation size %d, %d %s): was the plug-in rebuilt with another "
                   "observation or action size? (%s)",
                   env_name, lib, sp->obs_dim,
                   sp->action_dim > 0 ? sp->action_dim : sp->num_actions,
                   sp->action_dim > 0 ? "action dimensions" : "actions", detail);
}

int trainer_load_policy(const calf_config *cfg, const char *path, const ckpt_header *hdr,
                        const algorithm_ops **ops, algorithm **algo, calf_error *err) {
    *ops = trainer_algorithm(cfg);
    *algo = NULL;
    const calf_env_class *cls = calf_env_lookup(calf_config_string(cfg, CALF_CFG_ENV_NAME), err);
    if (!cls) return CALF_EINVAL;
    int E = (int)calf_config_int(cfg, CALF_CFG_NUM_ENVS);
    int T = (int)calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    algo_setup s = {.cfg = cfg, .spec = &cls->spec, .c = NULL, .E = E, .begin = 0, .count = 0,
                    .T = T, .seed = (uint64_t)calf_config_int(cfg, CALF_CFG_RANDOM_SEED)};
    unsigned char *head = NULL;
    size_t n = 0;
    int rc = read_head(path, hdr, &head, &n, err);
    if (rc == CALF_OK) rc = (*ops)->create(&s, algo, err);
    if (rc == CALF_OK) {
        ckpt_reader r;
        ckpt_reader_init(&r, head, n, path, err);
        ckpt_meta m;
        rc = read_meta_algo(&r, path, hdr->iteration, E, T, &m, *ops, *algo, err);
        if (rc == CALF_EINVAL) plugin_hint(calf_config_string(cfg, CALF_CFG_ENV_NAME), err);
    }
    free(head);
    if (rc && *algo) {
        (*ops)->destroy(*algo);
        *algo = NULL;
    }
    return rc;
}

/* Load env records [c0, c1) (global) of `chunk` that this process owns. */
static int load_records(const trainer_ckpt_view *v, const unsigned char *chunk, int c0, int c1, size_t rec,
                        const char *name, calf_error *err) {
    int lo, hi;
    overlap(v, c0, c1, &lo, &hi);
    size_t vrec = vec_env_record_size(v->ve);
    for (int e = lo; e < hi; e++) {
        const unsigned char *p = chunk + (size_t)(v->begin + e - c0) * rec;
        calf_error verr;
        int rc = vec_env_load_record(v->ve, e, p, &verr);
        if (rc) return calf_error_set(err, rc, "%s: %s", name, verr.msg);
        if ((rc = v->ops->load_env(v->algo, e, p + vrec, name, err))) return rc;
    }
    return CALF_OK;
}

/* The checkpoint's env records are rec bytes, this run's others. Where the env saves a
 * state of its own (save_size), that is most likely what changed: a Python env sizes its
 * slot from a fresh pickle (register_env), which grows with its code; the state size that
 * gives the checkpoint's records is named, as what to register the env with. */
static int record_size_error(const trainer_ckpt_view *v, const char *name, uint64_t rec,
                             calf_error *err) {
    size_t now = env_record_size(v);
    const calf_env_class *cls = calf_env_find(v->env_name);
    size_t ss = cls && cls->save ? cls->spec.save_size : 0;
    if (ss > 0 && rec > now - ss && rec - (now - ss) <= ((uint64_t)1 << 32)) {
        /* vec_env pads a record to 8 bytes: this size pads to the checkpoint's records */
        unsigned long long theirs = (unsigned long long)(ss + (rec - now));
        return calf_error_set(err, CALF_EINVAL,
                              "%s: env record size %llu, this run's %zu: environment %s saves "
                              "%zu bytes of state per env now, the checkpoint's records hold "
                              "%llu (a Python env's room is sized from a fresh pickle unless "
                              "given: resume with register_env(state_bytes=%llu) or "
                              "--env_py_state_bytes %llu)",
                              name, (unsigned long long)rec, now, v->env_name, ss, theirs,
                              theirs, theirs);
    }
    return calf_error_set(err, CALF_EINVAL, "%s: env record size %llu, expected %zu", name,
                          (unsigned long long)rec, now);
}

/* Resume from rs: each process reads the head and its own envs' records from the file,
 * or, where only rank 0 reads files (MPI ranks, which may not share a file system), rank
 * 0 reads and sends the head, then every record chunk by chunk. */
int trainer_checkpoint_load(const trainer_ckpt_view *v, const resume_state *rs,
                            trainer_counters *counters, calf_error *err) {
    const char *name = rs->path;
    unsigned char *head = NULL;
    size_t n = 0;
    int rc = CALF_OK;
    if (!rs->via_rank0 || comm_is_main(v->c)) rc = read_head(rs->path, &rs->hdr, &head, &n, err);
    if (rs->via_rank0) {
        int64_t msg[2] = {rc, (int64_t)n};
        int brc = comm_broadcast(v->c, msg, sizeof msg, 0, err);
        if (brc) return brc;
        if (msg[0] != CALF_OK) {
            if (!comm_is_main(v->c)) calf_error_set(err, (int)msg[0], "%s: rank 0 could not read it", name);
            free(head);
            return (int)msg[0];
        }
        if (!comm_is_main(v->c) && !(head = mem_alloc((size_t)msg[1], err))) return CALF_ENOMEM;
        n = (size_t)msg[1];
        if ((rc = comm_broadcast(v->c, head, n, 0, err))) {
            free(head);
            return rc;
        }
    }
    if (rc) return rc;
    ckpt_reader r;
    ckpt_reader_init(&r, head, n, name, err);
    ckpt_meta m;
    rc = read_meta_algo(&r, name, rs->hdr.iteration, v->E, v->T, &m, v->ops, v->algo, err);
    if (rc == CALF_EINVAL) plugin_hint(v->env_name, err);
    uint64_t rec = 0;
    if (rc == CALF_OK) {
        ckpt_get_tag(&r, "ENVS");
        ckpt_get_u64(&r, &rec);
        rc = ckpt_reader_finish(&r);
    }
    free(head);
    if (rc) return rc;
    if (rec != env_record_size(v)) return record_size_error(v, name, rec, err);
    if (rs->hdr.payload_size != m.head_bytes + (uint64_t)v->E * rec)
        return calf_error_set(err, CALF_EINVAL, "%s: env records do not fill the payload", name);
    counters->iteration = m.iteration;
    counters->env_steps = m.env_steps;
    counters->total_episodes = m.total_episodes;
    int per = chunk_envs(rec);
    if (!rs->via_rank0) {
        /* this process's block of the records, which are in global env order */
        unsigned char *buf = mem_alloc(rec * (size_t)(per < v->count ? per : v->count ? v->count : 1), err);
        if (!buf) return CALF_ENOMEM;
        for (int c0 = v->begin; c0 < v->begin + v->count && rc == CALF_OK; c0 += per) {
            int c1 = v->begin + v->count - c0 > per ? c0 + per : v->begin + v->count;
            rc = ckpt_read_range(name, m.head_bytes + (uint64_t)c0 * rec, buf,
                                 (size_t)(c1 - c0) * rec, err);
            if (rc == CALF_OK) rc = load_records(v, buf, c0, c1, rec, name, err);
        }
        free(buf);
        return rc;
    }
    /* every rank takes part in every chunk's broadcast and keeps its own records; a
     * failure on any rank is agreed on after the chunk, so none waits for the others */
    unsigned char *buf = mem_alloc(rec * (size_t)(per < v->E ? per : v->E), err);
    if (!buf) return CALF_ENOMEM;
    for (int c0 = 0; c0 < v->E && rc == CALF_OK; c0 += per) {
        int c1 = v->E - c0 > per ? c0 + per : v->E;
        size_t bytes = (size_t)(c1 - c0) * rec;
        int64_t st = CALF_OK;
        if (comm_is_main(v->c)) st = ckpt_read_range(name, m.head_bytes + (uint64_t)c0 * rec, buf, bytes, err);
        if ((rc = comm_broadcast(v->c, &st, sizeof st, 0, err))) break;
        if (st != CALF_OK) {
            if (!comm_is_main(v->c)) calf_error_set(err, (int)st, "%s: rank 0 could not read it", name);
            rc = (int)st;
            break;
        }
        if ((rc = comm_broadcast(v->c, buf, bytes, 0, err))) break;
        int lrc = load_records(v, buf, c0, c1, rec, name, err), any = 0;
        if ((rc = comm_any(v->c, lrc != CALF_OK, &any, err))) break;
        if (any) rc = lrc != CALF_OK ? lrc : CALF_EINVAL;
    }
    free(buf);
    return rc;
}
