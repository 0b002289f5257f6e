/* Suffix automaton of one string, for the substring kernels of
 * fastkern/_structured.pyx:
 *
 *     k(x, y) = sum over strings s of w(|s|) occ_x(s) occ_y(s)
 *
 * The automaton of x has one state per class of substrings of x with the
 * same end positions: a state v holds the lengths len(link v) + 1 .. len v,
 * all with occ(v) = |endpos v| occurrences in x.  With W(L) = w(1) + ... +
 * w(L) and, down the suffix links, F(v) = F(link v) + occ(v) (W(len v) -
 * W(len link v)), F(root) = 0, the suffixes of a string of length L in
 * state v that occur in x weigh
 *
 *     F(link v) + occ(v) (W(L) - W(len link v)).
 *
 * Reading y through the automaton (the matching statistics: the state and
 * length of the longest suffix of y[:j + 1] that occurs in x) and adding
 * that at every position j gives k(x, y): O(|y|) per pair once x's
 * automaton is built in O(|x|) (Blumer et al. 1985; the matching
 * statistics are Chang and Lawler's, 1994).
 *
 * Characters are int32 code points, so the transitions live in an
 * open-addressing hash keyed by (state, character), at most half full; each
 * state also lists its outgoing characters, which cloning a state copies.
 *
 * Rounding: W(L) - W(l) may be a small difference of large sums, but the
 * states up the links of v occur at least occ(v) times, so F(link v) >=
 * occ(v) W(l) and each added term is at least occ(v) W(L): its rounding
 * error stays a few ulps of the term.  Integer weights stay exact.
 *
 * Where the weights leave float64 (normalised kernels only), W and F are
 * held in extended range (fk_xf: a mantissa and a 64-bit binary exponent)
 * and each pair's sum is scaled by a power of two chosen per sample, which
 * cancels exactly in the normalisation.
 *
 * No allocation: fk_sam_bytes(m) bytes hold the automaton of any string of
 * at most m characters, laid out by fk_sam_init at the start of the buffer.
 */
#ifndef FK_SAM_H
#define FK_SAM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fk_portable.h"

typedef struct {
    int32_t len;     /* the longest of the state's strings */
    int32_t link;    /* suffix link; -1 at the root */
    int32_t linklen; /* len of the link (0 at the root) */
    int32_t head;    /* first outgoing edge in the edge list, -1 if none */
    double occ;      /* occurrences in x of each of the state's strings */
    double flink;    /* F(link): the weight of the strings below the state */
} fk_sam_state;

typedef struct {
    uint64_t key; /* (state << 32) | character; FK_SAM_EMPTY if the slot is free */
    int32_t to;
    int32_t pad;
} fk_sam_slot;

typedef struct {
    fk_sam_state *st;
    int32_t *ech, *enext; /* edge lists: character, next edge of the same state */
    fk_sam_slot *slots;
    int64_t *fle;         /* on scaled weights: the binary exponent of each flink */
    int32_t *order, *cnt; /* counting sort of the states by len */
    ptrdiff_t m;          /* the longest string the buffer holds */
    ptrdiff_t nstates, nedges;
    int shift;            /* 64 - log2(number of slots in use) */
    uint64_t mask;
    int64_t row;          /* the sample whose automaton is built (-1: none) */
} fk_sam;

#define FK_SAM_EMPTY UINT64_MAX

FK_INLINE size_t fk_sam_align(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* At most 2m - 1 states (2 for m = 1) and 3m - 4 transitions (m >= 3). */
FK_INLINE ptrdiff_t fk_sam_max_states(ptrdiff_t m) { return 2 * m + 2; }
FK_INLINE ptrdiff_t fk_sam_max_edges(ptrdiff_t m) { return 3 * m + 2; }

/* log2 of the hash slots for a string of m characters: at least twice the
 * transitions, so a probe meets a free slot within a few steps. */
FK_INLINE int fk_sam_bits(ptrdiff_t m)
{
    int b = 4;
    while (((ptrdiff_t)1 << b) < 2 * fk_sam_max_edges(m))
        b++;
    return b;
}

FK_INLINE size_t fk_sam_bytes(ptrdiff_t m)
{
    size_t ns = (size_t)fk_sam_max_states(m), ne = (size_t)fk_sam_max_edges(m);
    return fk_sam_align(sizeof(fk_sam)) + fk_sam_align(ns * sizeof(fk_sam_state))
           + 2 * fk_sam_align(ne * sizeof(int32_t))
           + fk_sam_align(((size_t)1 << fk_sam_bits(m)) * sizeof(fk_sam_slot))
           + fk_sam_align(ns * sizeof(int64_t)) + fk_sam_align(ns * sizeof(int32_t)) + fk_sam_align((size_t)(m + 2) * sizeof(int32_t))
           + 64;
}

/* The automaton laid out in buf by fk_sam_init (at its first 64-byte boundary). */
FK_INLINE fk_sam *fk_sam_at(void *buf)
{
    return (fk_sam *)(((uintptr_t)buf + 63) & ~(uintptr_t)63);
}

/* Lays out an automaton for strings of at most m characters in buf
 * (fk_sam_bytes(m) bytes) and returns it; nothing is built yet. */
static fk_sam *fk_sam_init(void *buf, ptrdiff_t m)
{
    fk_sam *s = fk_sam_at(buf);
    char *p = (char *)s;
    size_t ns = (size_t)fk_sam_max_states(m), ne = (size_t)fk_sam_max_edges(m);
    p += fk_sam_align(sizeof(fk_sam));
    s->st = (fk_sam_state *)p;
    p += fk_sam_align(ns * sizeof(fk_sam_state));
    s->ech = (int32_t *)p;
    p += fk_sam_align(ne * sizeof(int32_t));
    s->enext = (int32_t *)p;
    p += fk_sam_align(ne * sizeof(int32_t));
    s->slots = (fk_sam_slot *)p;
    p += fk_sam_align(((size_t)1 << fk_sam_bits(m)) * sizeof(fk_sam_slot));
    s->fle = (int64_t *)p;
    p += fk_sam_align(ns * sizeof(int64_t));
    s->order = (int32_t *)p;
    p += fk_sam_align(ns * sizeof(int32_t));
    s->cnt = (int32_t *)p;
    s->m = m;
    s->nstates = 0;
    s->nedges = 0;
    s->shift = 64;
    s->mask = 0;
    s->row = -1;
    return s;
}

/* The slot of (v, c): the one holding it, or the free slot where it goes. */
FK_INLINE fk_sam_slot *fk_sam_find(const fk_sam *s, int32_t v, int32_t c)
{
    uint64_t key = ((uint64_t)(uint32_t)v << 32) | (uint32_t)c;
    uint64_t h = (key * 0x9E3779B97F4A7C15ULL) >> s->shift;
    for (;;) {
        fk_sam_slot *slot = s->slots + h;
        if (slot->key == key || slot->key == FK_SAM_EMPTY)
            return slot;
        h = (h + 1) & s->mask;
    }
}

FK_INLINE void fk_sam_add(fk_sam *s, fk_sam_slot *slot, int32_t v, int32_t c, int32_t to)
{
    int32_t e = (int32_t)s->nedges++;
    slot->key = ((uint64_t)(uint32_t)v << 32) | (uint32_t)c;
    slot->to = to;
    s->ech[e] = c;
    s->enext[e] = s->st[v].head;
    s->st[v].head = e;
}

FK_INLINE int32_t fk_sam_new_state(fk_sam *s, int32_t len, int32_t link, double occ)
{
    int32_t v = (int32_t)s->nstates++;
    s->st[v].len = len;
    s->st[v].link = link;
    s->st[v].linklen = 0;
    s->st[v].head = -1;
    s->st[v].occ = occ;
    s->st[v].flink = 0.0;
    return v;
}

/* Extended range: m 2^e with m = 0 or 0.5 <= |m| < 1, for the normalised
 * kernels whose weights leave float64 (lambda_**(2L) of a tiny lambda_,
 * lambda_**-L of a small one over long strings).  Each operation rounds
 * once, as in double; only the exponent has more room. */
typedef struct {
    double m;
    int64_t e;
} fk_xf;

FK_INLINE fk_xf fk_xf_make(double m, int64_t e)
{
    fk_xf r;
    int k = 0;
    r.m = frexp(m, &k);
    r.e = r.m == 0.0 ? 0 : e + k;
    return r;
}

FK_INLINE fk_xf fk_xf_add(fk_xf a, fk_xf b)
{
    int64_t d;
    if (b.m == 0.0)
        return a;
    if (a.m == 0.0)
        return b;
    if (a.e < b.e) {
        fk_xf t = a;
        a = b;
        b = t;
    }
    d = a.e - b.e;
    /* Past 1100 binary places b is below a's last bit even as a subnormal. */
    return fk_xf_make(a.m + (d > 1100 ? 0.0 : ldexp(b.m, (int)-d)), a.e);
}

/* occ (W(L) - W(l)) for the weights W held as mantissas wm and exponents we. */
FK_INLINE fk_xf fk_xf_span(const double *wm, const int64_t *we, int32_t L, int32_t l,
                           double occ)
{
    fk_xf a, b;
    a.m = wm[L];
    a.e = we[L];
    b.m = -wm[l];
    b.e = we[l];
    a = fk_xf_add(a, b);
    return fk_xf_make(a.m * occ, a.e);
}

/* Builds the automaton of x[0:p] (p <= m) with the cumulative weights W
 * (W[L] for L = 0..p, W[0] = 0), and marks it as sample `row`'s.  With
 * exponents We, W[L] is W[L] 2^We[L] (fk_xf) and so is F: st[v].flink its
 * mantissa, fle[v] its exponent. */
static void fk_sam_build(fk_sam *s, const int32_t *x, ptrdiff_t p, const double *W,
                         const int64_t *We, int64_t row)
{
    fk_sam_state *st = s->st;
    int bits = fk_sam_bits(p);
    ptrdiff_t nslots = (ptrdiff_t)1 << bits, i;
    int32_t last, v;
    s->shift = 64 - bits;
    s->mask = (uint64_t)nslots - 1;
    for (i = 0; i < nslots; i++)
        s->slots[i].key = FK_SAM_EMPTY;
    s->nstates = 0;
    s->nedges = 0;
    last = fk_sam_new_state(s, 0, -1, 0.0);
    for (i = 0; i < p; i++) {
        int32_t c = x[i], cur = fk_sam_new_state(s, st[last].len + 1, 0, 1.0), u = last;
        fk_sam_slot *slot = fk_sam_find(s, u, c);
        while (slot->key == FK_SAM_EMPTY) {
            fk_sam_add(s, slot, u, c, cur);
            u = st[u].link;
            if (u < 0)
                break;
            slot = fk_sam_find(s, u, c);
        }
        if (u >= 0) {
            int32_t q = slot->to;
            if (st[u].len + 1 == st[q].len) {
                st[cur].link = q;
            } else {
                int32_t clone = fk_sam_new_state(s, st[u].len + 1, st[q].link, 0.0);
                for (int32_t e = st[q].head; e >= 0; e = s->enext[e]) {
                    int32_t ch = s->ech[e];
                    int32_t to = fk_sam_find(s, q, ch)->to;
                    fk_sam_add(s, fk_sam_find(s, clone, ch), clone, ch, to);
                }
                while (slot->to == q) {
                    slot->to = clone;
                    u = st[u].link;
                    if (u < 0)
                        break;
                    slot = fk_sam_find(s, u, c);
                    if (slot->key == FK_SAM_EMPTY)
                        break;
                }
                st[q].link = clone;
                st[cur].link = clone;
            }
        }
        last = cur;
    }
    /* The states by increasing len (a link is shorter than its state), to
     * add the occurrences up the links and F down them. */
    memset(s->cnt, 0, (size_t)(p + 2) * sizeof(int32_t));
    for (v = 0; v < (int32_t)s->nstates; v++)
        s->cnt[st[v].len + 1]++;
    for (i = 0; i <= p; i++)
        s->cnt[i + 1] += s->cnt[i];
    for (v = 0; v < (int32_t)s->nstates; v++)
        s->order[s->cnt[st[v].len]++] = v;
    for (i = s->nstates - 1; i > 0; i--) {
        v = s->order[i];
        st[st[v].link].occ += st[v].occ;
    }
    st[0].occ = 0.0;
    s->fle[0] = 0;
    for (i = 1; i < s->nstates; i++) {
        int32_t u;
        v = s->order[i];
        u = st[v].link;
        st[v].linklen = st[u].len;
        if (We == NULL) {
            st[v].flink = u ? st[u].flink + st[u].occ * (W[st[u].len] - W[st[u].linklen])
                            : 0.0;
        } else if (u) {
            fk_xf f;
            f.m = st[u].flink;
            f.e = s->fle[u];
            f = fk_xf_add(f, fk_xf_span(W, We, st[u].len, st[u].linklen, st[u].occ));
            st[v].flink = f.m;
            s->fle[v] = f.e;
        } else {
            st[v].flink = 0.0;
            s->fle[v] = 0;
        }
    }
    s->row = row;
}

/* One step of the matching statistics: the state v and length L of the
 * longest suffix of the text read so far that occurs in x, after c. */
FK_INLINE void fk_sam_step(const fk_sam *s, int32_t c, int32_t *v, int32_t *L)
{
    for (;;) {
        const fk_sam_slot *slot = fk_sam_find(s, *v, c);
        if (slot->key != FK_SAM_EMPTY) {
            *v = slot->to;
            *L += 1;
            return;
        }
        if (*v == 0) {
            *L = 0;
            return;
        }
        *v = s->st[*v].link;
        *L = s->st[*v].len;
    }
}

/* k(x, y) for the built automaton of x and y = t[0:q]. */
static double fk_sam_match(const fk_sam *s, const int32_t *t, ptrdiff_t q, const double *W)
{
    const fk_sam_state *st = s->st;
    double acc = 0.0;
    int32_t v = 0, L = 0;
    for (ptrdiff_t j = 0; j < q; j++) {
        fk_sam_step(s, t[j], &v, &L);
        if (L) {
            const fk_sam_state *a = st + v;
            acc += a->flink + a->occ * (W[L] - W[a->linklen]);
        }
    }
    return acc;
}

/* k(x, y) 2^(-shift2 / 2) for an automaton built with exponents We: the
 * sum in extended range, scaled once at the end (by a power of two, and
 * sqrt(1/2) when shift2 is odd). */
static double fk_sam_match_scaled(const fk_sam *s, const int32_t *t, ptrdiff_t q,
                                  const double *W, const int64_t *We, int64_t shift2)
{
    const fk_sam_state *st = s->st;
    fk_xf acc = {0.0, 0};
    /* shift2 = 2 h + odd with h = floor(shift2 / 2). */
    int64_t h = shift2 >= 0 ? shift2 / 2 : -((1 - shift2) / 2), odd = shift2 - 2 * h, e;
    int32_t v = 0, L = 0;
    for (ptrdiff_t j = 0; j < q; j++) {
        fk_sam_step(s, t[j], &v, &L);
        if (L) {
            const fk_sam_state *a = st + v;
            fk_xf f;
            f.m = a->flink;
            f.e = s->fle[v];
            acc = fk_xf_add(acc, fk_xf_add(f, fk_xf_span(W, We, L, a->linklen, a->occ)));
        }
    }
    if (acc.m == 0.0)
        return 0.0;
    e = acc.e - h;
    e = e < -2200 ? -2200 : e > 2200 ? 2200 : e;
    return ldexp(odd ? acc.m * 0.70710678118654752440 : acc.m, (int)e);
}

#endif
