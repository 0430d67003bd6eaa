/* A mirror of a stream's view (kvc_mirror.h): slots for the view's rows and,
 * per step, the edits that bring another memory's copy up to date.
 *
 * A row is known by its key row's **position**, key offset / key row bytes:
 * rows of one stride that do not overlap have distinct positions, and every
 * row a view lists is a key row of the stream's type (the current token
 * aside, which has the reserved position npos). slot_of[position] is the row's
 * slot. What the core wrote since the last step comes from the journal, marked
 * in a bitmap of the arena's 4-byte words (a row's first word).
 *
 * A step does not walk rows that cannot have changed. The view's unweighted
 * segments become **ranges** of positions (adjacent ones merged: the window
 * ring's two pieces are one range); a range that starts where last step's did,
 * with the same weight, role and value rows, and is at least as long, keeps
 * its first rows' slots unwalked: only the journal's runs inside it are looked
 * at. Weighted segments (weights that change without a row write) and the
 * current token are walked every step, and only the positions of last step's
 * walked or changed ranges are searched for rows that left. So a method whose
 * view is slot arithmetic (exact, sink-window, the eviction methods) costs a
 * few segments and its journal, not its rows.
 *
 * State, all in the caller's memory after the header (8-aligned parts):
 *   slot_of[npos + 1]  u32, KVC_NO_SLOT when the position is not mirrored
 *   dirty[words]       u64 bits, set and cleared within a step
 *   slots[nslots]      the slot's row, weight, role, and this step's marks
 *   free[nslots]       u32, a stack of freed slots below n_rows
 *   fresh[nslots]      the view rows that need a slot this step
 * and, in the header, last step's ranges. */
#include <math.h>
#include <string.h>

#define KVC_ADVANCED 1
#include "kvc/kvc_mirror.h"
#include "stream_internal.h"

#define KVC_MIRROR_MAGIC 0x4B564D31u /* "KVM1" */
#define KVC_NO_SLOT      UINT32_MAX

/* The view's segment that holds the current token (f32 whatever the type). */
#define PENDING_SEGMENT (KVC_STREAM_CAUSAL_SEGMENTS - 1u)

typedef struct mirror_slot {
    uint64_t voff;   /* the value row's offset, or KVC_MIRROR_NO_VALUE */
    uint32_t pos;    /* the key row's position, KVC_NO_SLOT when free */
    float weight;    /* the row's weight times its segment's scale */
    uint32_t role;   /* KVC_SET_*, 0 when free */
    uint32_t seen;   /* the epoch of the last step that found it in the view */
    uint32_t edited; /* the epoch of the last step that wrote an edit for it */
    uint32_t edit;   /* that edit's index */
} mirror_slot;

/* One row of the view, as the mirror sees it. */
typedef struct view_row {
    uint64_t koff, voff;
    uint32_t pos;
    float weight;
    uint32_t role;
    uint32_t pending;
} view_row;

/* A run of view rows at consecutive positions: an unweighted range (one
 * weight for all), or a weighted segment's rows (walked, `weighted` = 1). */
typedef struct mirror_range {
    uint64_t koff, voff; /* the first row's; voff KVC_MIRROR_NO_VALUE for key-only rows */
    uint32_t pos, n;
    float weight;
    uint32_t role;
    uint32_t weighted; /* 1: walked every step */
    uint32_t kept;     /* this step: rows at its start that keep their slots unwalked */
} mirror_range;

#define MAX_RANGES KVC_VIEW_MAX_SEGMENTS

struct kvc_mirror {
    uint32_t magic;
    uint32_t epoch;
    uint64_t digest;      /* of the stream's plan (kvc_stream::digest) */
    uint64_t arena_bytes; /* the stream's */
    uint32_t ks, vs;      /* key and value row bytes */
    uint32_t npos;        /* key positions in the arena; npos itself is the current token's */
    uint32_t nslots;      /* npos + 1 */
    uint32_t n_rows;      /* slots below this may be in use */
    uint32_t n_free;      /* entries of the free stack */
    uint32_t dtype;
    uint32_t words; /* of the dirty bitmap */
    uint64_t off_slot_of, off_dirty, off_slots, off_free, off_fresh;
    uint32_t n_prev;       /* last step's ranges */
    uint32_t prev_pending; /* last step had a current token */
    mirror_range prev[MAX_RANGES];
};

#define PART(m, off, type) ((type *)(void *)((unsigned char *)(m) + (m)->off))

static uint64_t align8(uint64_t x) { return (x + 7u) & ~(uint64_t)7u; }

/* The layout of a mirror for plan p (its sizes; offsets into *m when m is not NULL). */
static uint64_t mirror_layout(const kvc_stream_plan *p, struct kvc_mirror *m)
{
    const uint64_t ks = kvc_row_bytes(p->dtype, p->d), npos = p->arena_bytes / ks;
    const uint64_t nslots = npos + 1u, words = (p->arena_bytes / 4u + 63u) / 64u;
    uint64_t at = align8(sizeof(struct kvc_mirror));
    const uint64_t slot_of = at;
    at = align8(at + (npos + 1u) * sizeof(uint32_t));
    const uint64_t dirty = at;
    at += words * sizeof(uint64_t);
    const uint64_t slots = at;
    at += nslots * sizeof(mirror_slot);
    const uint64_t freel = at;
    at = align8(at + nslots * sizeof(uint32_t));
    const uint64_t fresh = at;
    at += nslots * sizeof(view_row);
    if (m != NULL) {
        m->ks = (uint32_t)ks;
        m->vs = (uint32_t)kvc_row_bytes(p->dtype, p->dv);
        m->npos = (uint32_t)npos;
        m->nslots = (uint32_t)nslots;
        m->words = (uint32_t)words;
        m->off_slot_of = slot_of, m->off_dirty = dirty, m->off_slots = slots, m->off_free = freel;
        m->off_fresh = fresh;
    }
    return at;
}

/* Why a stream cannot be mirrored, or NULL. */
static int mirrorable(const kvc_stream *st)
{
    const kvc_stream_plan *p = &st->plan;
    return !p->key_blocks && p->dtype != KVC_DTYPE_KIVI4 && kvc_row_bytes(p->dtype, p->d) > 0 &&
           p->arena_bytes / kvc_row_bytes(p->dtype, p->d) < UINT32_MAX - 1u;
}

size_t kvc_mirror_bytes(const kvc_stream *st)
{
    if (kvc_stream_check(st) != KVC_OK || !mirrorable(st)) return 0;
    const uint64_t b = mirror_layout(&st->plan, NULL);
    return b <= SIZE_MAX ? (size_t)b : 0;
}

kvc_status kvc_mirror_init(void *mem, size_t bytes, const kvc_stream *st, kvc_mirror **out)
{
    if (out != NULL) *out = NULL;
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    if (!mirrorable(st)) return KVC_E_UNSUPPORTED;
    if (mem == NULL || out == NULL || ((uintptr_t)mem & 7u) != 0 || bytes < kvc_mirror_bytes(st)) return KVC_E_ARG;
    struct kvc_mirror *m = (struct kvc_mirror *)mem;
    memset(m, 0, sizeof *m);
    mirror_layout(&st->plan, m);
    m->digest = st->digest;
    m->arena_bytes = st->plan.arena_bytes;
    m->dtype = st->plan.dtype;
    uint32_t *slot_of = PART(m, off_slot_of, uint32_t);
    for (uint32_t i = 0; i <= m->npos; i++) slot_of[i] = KVC_NO_SLOT;
    memset(PART(m, off_dirty, uint64_t), 0, (size_t)m->words * sizeof(uint64_t));
    mirror_slot *s = PART(m, off_slots, mirror_slot);
    for (uint32_t i = 0; i < m->nslots; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].pos = KVC_NO_SLOT;
    }
    m->magic = KVC_MIRROR_MAGIC;
    *out = m;
    return KVC_OK;
}

uint32_t kvc_mirror_slots(const kvc_mirror *m) { return m != NULL && m->magic == KVC_MIRROR_MAGIC ? m->nslots : 0; }

/* ---- one step ---- */

typedef struct step_ctx {
    struct kvc_mirror *m;
    const unsigned char *stream;
    uint32_t *slot_of;
    uint64_t *dirty;
    mirror_slot *slots;
    uint32_t *free_stack;
    view_row *fresh;
    uint32_t n_fresh;
    int all_dirty;
    kvc_mirror_edit *edits;
    size_t n_edits;
} step_ctx;

static int is_dirty(const step_ctx *c, uint64_t off)
{
    const uint64_t w = off / 4u;
    return (c->dirty[w / 64u] >> (w % 64u)) & 1u;
}

/* The edit of slot s this step (one per slot: a freed slot reused this step
 * has its exclusion replaced by the new row's edit). */
static kvc_mirror_edit *edit_of(step_ctx *c, uint32_t s)
{
    mirror_slot *sl = &c->slots[s];
    if (sl->edited == c->m->epoch) return &c->edits[sl->edit];
    sl->edited = c->m->epoch;
    sl->edit = (uint32_t)c->n_edits;
    kvc_mirror_edit *e = &c->edits[c->n_edits++];
    memset(e, 0, sizeof *e);
    e->slot = s;
    return e;
}

static void put_edit(step_ctx *c, uint32_t s, const view_row *r, uint32_t what)
{
    kvc_mirror_edit *e = edit_of(c, s);
    e->what |= what;
    e->key_offset = r->koff;
    e->value_offset = r->voff;
    e->weight = r->weight;
    e->role = r->role;
}

static void row_seen(step_ctx *c, const view_row *r)
{
    const uint32_t s = c->slot_of[r->pos];
    if (s == KVC_NO_SLOT) {
        c->fresh[c->n_fresh++] = *r;
        return;
    }
    mirror_slot *sl = &c->slots[s];
    sl->seen = c->m->epoch;
    uint32_t what = 0;
    if (r->pending || c->all_dirty)
        what |= KVC_MIRROR_ROW | (r->pending && c->m->dtype != KVC_DTYPE_F32 ? KVC_MIRROR_F32 : 0u);
    if (is_dirty(c, r->koff)) what |= KVC_MIRROR_KEY;
    if (sl->voff != r->voff || (r->voff != KVC_MIRROR_NO_VALUE && is_dirty(c, r->voff))) what |= KVC_MIRROR_VALUE;
    if (sl->weight != r->weight || sl->role != r->role) what |= KVC_MIRROR_WEIGHT;
    sl->voff = r->voff;
    sl->weight = r->weight;
    sl->role = r->role;
    if (what) put_edit(c, s, r, what);
}

/* Row `row` of segment `seg` of the view; 0 when it holds nothing (weight 0). */
static int view_row_at(const step_ctx *c, const kvc_view *v, uint32_t seg, uint32_t row, view_row *r)
{
    const kvc_segment *g = &v->seg[seg];
    const double w = (g->weights ? (double)g->weights[row] : 1.0) * g->scale;
    const float wf = (float)w;
    if (!(wf > 0.0f) || !(wf < INFINITY)) return 0;
    const unsigned char *k = kvc_segment_key_rows(g), *val = kvc_segment_value_rows(g);
    r->pending = seg == PENDING_SEGMENT;
    const uint64_t kstride = r->pending ? 4u * (uint64_t)v->d : c->m->ks;
    const uint64_t vstride = r->pending ? 4u * (uint64_t)v->dv : c->m->vs;
    r->koff = (uint64_t)(k - c->stream) + row * kstride;
    r->voff = val ? (uint64_t)(val - c->stream) + row * vstride : KVC_MIRROR_NO_VALUE;
    r->pos = r->pending ? c->m->npos : (uint32_t)(r->koff / c->m->ks);
    r->weight = wf;
    r->role = g->role;
    return 1;
}

/* Every segment inside the stream's arena, of the mirror's row type (the
 * current token's f32 rows aside): what makes a position an index of slot_of. */
static int view_in_arena(const struct kvc_mirror *m, const unsigned char *stream, const kvc_view *v)
{
    for (uint32_t i = 0; i < v->n_seg; i++) {
        const kvc_segment *g = &v->seg[i];
        if (g->n == 0) continue;
        const int pending = i == PENDING_SEGMENT;
        if (!pending && g->dtype != m->dtype) return 0;
        const unsigned char *k = kvc_segment_key_rows(g), *val = kvc_segment_value_rows(g);
        const uint64_t ks = pending ? 4u * (uint64_t)v->d : m->ks, vs = pending ? 4u * (uint64_t)v->dv : m->vs;
        if (k == NULL || k < stream || (uint64_t)(k - stream) > m->arena_bytes ||
            g->n > (m->arena_bytes - (uint64_t)(k - stream)) / ks)
            return 0;
        if (val != NULL && (val < stream || (uint64_t)(val - stream) > m->arena_bytes ||
                            g->n > (m->arena_bytes - (uint64_t)(val - stream)) / vs))
            return 0;
        if (pending && g->n != 1) return 0;
    }
    return 1;
}

/* The view's rows as ranges (see the file's head), sorted by position, the
 * unweighted ones merged where they continue each other. */
static uint32_t ranges_of(const struct kvc_mirror *m, const unsigned char *stream, const kvc_view *v, mirror_range *out,
                          uint32_t *seg_of)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < v->n_seg; i++) {
        const kvc_segment *g = &v->seg[i];
        if (g->n == 0 || i == PENDING_SEGMENT) continue;
        const unsigned char *k = kvc_segment_key_rows(g), *val = kvc_segment_value_rows(g);
        mirror_range r;
        memset(&r, 0, sizeof r);
        r.koff = (uint64_t)(k - stream);
        r.voff = val ? (uint64_t)(val - stream) : KVC_MIRROR_NO_VALUE;
        r.pos = (uint32_t)(r.koff / m->ks);
        r.n = (uint32_t)g->n;
        r.role = g->role;
        r.weighted = g->weights != NULL;
        if (!r.weighted) {
            r.weight = (float)g->scale;
            if (!(r.weight > 0.0f) || !(r.weight < INFINITY)) continue; /* holds nothing */
        }
        uint32_t at = n++; /* insertion by position */
        while (at > 0 && out[at - 1].pos > r.pos) {
            out[at] = out[at - 1];
            seg_of[at] = seg_of[at - 1];
            at--;
        }
        out[at] = r;
        seg_of[at] = i;
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < n; i++) {
        mirror_range *a = w > 0 ? &out[w - 1] : NULL;
        const mirror_range *b = &out[i];
        if (a != NULL && !a->weighted && !b->weighted && a->weight == b->weight && a->role == b->role &&
            b->pos == a->pos + a->n && b->koff == a->koff + (uint64_t)a->n * m->ks &&
            (a->voff == KVC_MIRROR_NO_VALUE ? b->voff == KVC_MIRROR_NO_VALUE
                                            : b->voff == a->voff + (uint64_t)a->n * m->vs)) {
            a->n += b->n;
            continue;
        }
        out[w] = *b;
        seg_of[w] = seg_of[i];
        w++;
    }
    return w;
}

/* The journal's rows inside the stream: their first words marked (set) or
 * cleared; when set, the rows of kept range starts they rewrote get their edits. */
static void journal_pass(step_ctx *c, const kvc_row_journal *j, uint64_t delta, const mirror_range *cur, uint32_t n_cur,
                         int set)
{
    const uint64_t bytes = c->m->arena_bytes;
    for (uint32_t i = 0; i < j->count; i++) {
        const kvc_row_write *w = &j->writes[i];
        for (uint32_t r = 0; r < w->rows; r++) {
            const uint64_t at = w->offset + (uint64_t)r * w->stride;
            if (at < delta || at - delta >= bytes) continue; /* another stream's, or the cache's tables */
            const uint64_t off = at - delta, word = off / 4u;
            if (!set) {
                c->dirty[word / 64u] &= ~((uint64_t)1u << (word % 64u));
                continue;
            }
            c->dirty[word / 64u] |= (uint64_t)1u << (word % 64u);
            for (uint32_t q = 0; q < n_cur; q++) {
                const mirror_range *g = &cur[q];
                if (g->kept == 0) continue;
                uint32_t what = 0;
                uint64_t row = 0;
                if (off >= g->koff && off - g->koff < (uint64_t)g->kept * c->m->ks && (off - g->koff) % c->m->ks == 0)
                    what = KVC_MIRROR_KEY, row = (off - g->koff) / c->m->ks;
                else if (g->voff != KVC_MIRROR_NO_VALUE && off >= g->voff &&
                         off - g->voff < (uint64_t)g->kept * c->m->vs && (off - g->voff) % c->m->vs == 0)
                    what = KVC_MIRROR_VALUE, row = (off - g->voff) / c->m->vs;
                if (!what) continue;
                view_row vr;
                vr.koff = g->koff + row * c->m->ks;
                vr.voff = g->voff == KVC_MIRROR_NO_VALUE ? KVC_MIRROR_NO_VALUE : g->voff + row * c->m->vs;
                vr.pos = g->pos + (uint32_t)row;
                vr.weight = g->weight;
                vr.role = g->role;
                vr.pending = 0;
                const uint32_t s = c->slot_of[vr.pos];
                if (s != KVC_NO_SLOT) put_edit(c, s, &vr, what);
                break;
            }
        }
    }
}

/* A slot whose row left the view: empty, and free for the next new row. */
static void slot_free(step_ctx *c, uint32_t s)
{
    mirror_slot *sl = &c->slots[s];
    c->slot_of[sl->pos] = KVC_NO_SLOT;
    sl->pos = KVC_NO_SLOT;
    sl->voff = KVC_MIRROR_NO_VALUE;
    sl->weight = 0.0f;
    sl->role = 0;
    c->free_stack[c->m->n_free++] = s;
    kvc_mirror_edit *e = edit_of(c, s);
    e->what = KVC_MIRROR_WEIGHT;
    e->key_offset = 0;
    e->value_offset = KVC_MIRROR_NO_VALUE;
    e->weight = 0.0f;
    e->role = 0;
}

static void position_left(step_ctx *c, uint32_t pos)
{
    const uint32_t s = c->slot_of[pos];
    if (s != KVC_NO_SLOT && c->slots[s].seen != c->m->epoch) slot_free(c, s);
}

kvc_status kvc_mirror_step(kvc_mirror *m, const kvc_stream *st, const kvc_row_journal *journal, kvc_mirror_edit *edits,
                           size_t cap, size_t *n_edits, uint32_t *n_rows)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    if (m == NULL || m->magic != KVC_MIRROR_MAGIC || edits == NULL || n_edits == NULL || n_rows == NULL)
        return KVC_E_ARG;
    if (cap < m->nslots) return KVC_E_ARG;
    if (st->digest != m->digest || st->plan.arena_bytes != m->arena_bytes) return KVC_E_STATE;
    const unsigned char *stream = (const unsigned char *)st;
    uint64_t delta = 0;
    if (journal != NULL) {
        if (journal->base == NULL || (uintptr_t)journal->base > (uintptr_t)stream ||
            (journal->count > 0 && journal->writes == NULL) || journal->count > journal->capacity)
            return KVC_E_ARG;
        delta = (uint64_t)((uintptr_t)stream - (uintptr_t)journal->base);
    }
    kvc_view v;
    kvc_stream_view_fill(st, &v);
    if (!view_in_arena(m, stream, &v)) return KVC_E_CORRUPT;

    /* From here on the step runs to its end. */
    if (m->epoch == UINT32_MAX) { /* the marks restart: no slot may look seen */
        mirror_slot *s = PART(m, off_slots, mirror_slot);
        for (uint32_t i = 0; i < m->nslots; i++) s[i].seen = s[i].edited = 0;
        m->epoch = 0;
    }
    m->epoch++;
    step_ctx c;
    c.m = m;
    c.stream = stream;
    c.slot_of = PART(m, off_slot_of, uint32_t);
    c.dirty = PART(m, off_dirty, uint64_t);
    c.slots = PART(m, off_slots, mirror_slot);
    c.free_stack = PART(m, off_free, uint32_t);
    c.fresh = PART(m, off_fresh, view_row);
    c.n_fresh = 0;
    c.all_dirty = journal == NULL || journal->dropped > 0;
    c.edits = edits;
    c.n_edits = 0;

    /* this step's ranges, and which start as last step's did */
    mirror_range cur[MAX_RANGES];
    uint32_t seg_of[MAX_RANGES], matched[MAX_RANGES] = {0};
    const uint32_t n_cur = ranges_of(m, stream, &v, cur, seg_of);
    for (uint32_t q = 0; q < n_cur && !c.all_dirty; q++) {
        mirror_range *g = &cur[q];
        if (g->weighted) continue;
        for (uint32_t p = 0; p < m->n_prev; p++) {
            const mirror_range *o = &m->prev[p];
            if (matched[p] || o->weighted || o->pos != g->pos || o->koff != g->koff || o->voff != g->voff ||
                o->weight != g->weight || o->role != g->role || o->n > g->n)
                continue;
            g->kept = o->n;
            matched[p] = 1;
            break;
        }
    }
    if (journal != NULL) journal_pass(&c, journal, delta, cur, n_cur, 1);

    /* the rows walked: weighted segments, the new ends of ranges, the current token */
    for (uint32_t q = 0; q < n_cur; q++) {
        const mirror_range *g = &cur[q];
        view_row r;
        if (g->weighted) {
            for (uint32_t j = 0; j < g->n; j++)
                if (view_row_at(&c, &v, seg_of[q], j, &r)) row_seen(&c, &r);
            continue;
        }
        r.weight = g->weight, r.role = g->role, r.pending = 0;
        for (uint32_t i = g->kept; i < g->n; i++) {
            r.koff = g->koff + (uint64_t)i * m->ks;
            r.voff = g->voff == KVC_MIRROR_NO_VALUE ? KVC_MIRROR_NO_VALUE : g->voff + (uint64_t)i * m->vs;
            r.pos = g->pos + i;
            row_seen(&c, &r);
        }
    }
    view_row pending_row;
    const int has_pending = v.seg[PENDING_SEGMENT].n == 1 && view_row_at(&c, &v, PENDING_SEGMENT, 0, &pending_row);
    if (has_pending) row_seen(&c, &pending_row);

    /* the rows that left: searched among last step's walked or changed ranges only */
    for (uint32_t p = 0; p < m->n_prev; p++)
        if (!matched[p])
            for (uint32_t i = 0; i < m->prev[p].n; i++) position_left(&c, m->prev[p].pos + i);
    if (m->prev_pending) position_left(&c, m->npos);

    /* the new rows: a freed slot, else the next one */
    for (uint32_t f = 0; f < c.n_fresh; f++) {
        const view_row *r = &c.fresh[f];
        const uint32_t s = m->n_free > 0 ? c.free_stack[--m->n_free] : m->n_rows++;
        mirror_slot *sl = &c.slots[s];
        sl->pos = r->pos;
        sl->voff = r->voff;
        sl->weight = r->weight;
        sl->role = r->role;
        sl->seen = m->epoch;
        c.slot_of[r->pos] = s;
        kvc_mirror_edit *e = edit_of(&c, s);
        e->what = 0; /* a freed slot's exclusion is replaced */
        put_edit(&c, s, r,
                 KVC_MIRROR_ROW | KVC_MIRROR_WEIGHT | (r->pending && m->dtype != KVC_DTYPE_F32 ? KVC_MIRROR_F32 : 0u));
    }
    if (journal != NULL) journal_pass(&c, journal, delta, cur, n_cur, 0);
    for (uint32_t q = 0; q < n_cur; q++) m->prev[q] = cur[q];
    m->n_prev = n_cur;
    m->prev_pending = (uint32_t)has_pending;
    *n_edits = c.n_edits;
    *n_rows = m->n_rows;
    return KVC_OK;
}

kvc_status kvc_mirror_view_mass(const kvc_mirror *m, const kvc_stream *st, const float *slot_mass, double *mass,
                                size_t n)
{
    const kvc_status chk = kvc_stream_check(st);
    if (chk != KVC_OK) return chk;
    if (m == NULL || m->magic != KVC_MIRROR_MAGIC || slot_mass == NULL || mass == NULL) return KVC_E_ARG;
    if (st->digest != m->digest || st->plan.arena_bytes != m->arena_bytes) return KVC_E_STATE;
    kvc_view v;
    kvc_stream_view_fill(st, &v);
    if (!view_in_arena(m, (const unsigned char *)st, &v) || n != kvc_view_entries_from(&v, 0)) return KVC_E_ARG;
    const uint32_t *slot_of = (const uint32_t *)(const void *)((const unsigned char *)m + m->off_slot_of);
    step_ctx c; /* view_row_at reads the mirror's strides and the stream's base only */
    memset(&c, 0, sizeof c);
    c.m = (struct kvc_mirror *)(uintptr_t)m;
    c.stream = (const unsigned char *)st;
    size_t e = 0;
    for (uint32_t i = 0; i < v.n_seg; i++)
        for (uint32_t j = 0; j < v.seg[i].n; j++, e++) {
            view_row r;
            mass[e] = 0.0;
            if (!view_row_at(&c, &v, i, j, &r)) continue;
            const uint32_t s = slot_of[r.pos];
            if (s == KVC_NO_SLOT || s >= m->n_rows) return KVC_E_STATE; /* a row the mirror does not hold */
            mass[e] = (double)slot_mass[s];
        }
    return KVC_OK;
}
