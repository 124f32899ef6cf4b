/* The transmit queue (client/src/transmit_queue.h): heap order against qsort, full and empty
 * queues, reset, replace_min, the heap's layout after every call for keys stopping at each
 * level, a k-way merge of sorted streams giving their exact sorted
 * union, and random operations checked against a plain array scanned for its minimum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "test_support.h"
#include "transmit_queue.h"

static uint64_t rng_state;

/* splitmix64: seeded per test so that a failure reproduces. */
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static size_t rnd_below(size_t n)
{
    return (size_t)(rnd() % n);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static tq_t *make(size_t cap)
{
    tq_t *q = NULL;
    assert_int_equal(tq_create(cap, &q), VARLOG_OK);
    assert_non_null(q);
    assert_int_equal(tq_capacity(q), cap);
    assert_int_equal(tq_size(q), 0);
    return q;
}

/* Pushes keys[0..n) (payload: the index) and pops them all: the keys come out as qsort
 * orders them, each with its own payload. */
static void check_sorts(tq_t *q, uint64_t *keys, size_t n)
{
    tq_reset(q);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tq_push(q, keys[i], i), VARLOG_OK);
    assert_int_equal(tq_size(q), n);
    uint64_t *want = malloc((n ? n : 1) * sizeof(*want));
    assert_non_null(want);
    for (size_t i = 0; i < n; i++)
        want[i] = keys[i];
    qsort(want, n, sizeof(*want), cmp_u64);
    for (size_t i = 0; i < n; i++) {
        tq_item_t peek, it;
        assert_int_equal(tq_peek_min(q, &peek), VARLOG_OK);
        assert_int_equal(tq_pop_min(q, &it), VARLOG_OK);
        assert_int_equal(peek.glsn, it.glsn);
        assert_int_equal(peek.val, it.val);
        assert_int_equal(it.glsn, want[i]);
        assert_true(it.val < n);
        assert_int_equal(keys[it.val], it.glsn);
    }
    assert_int_equal(tq_size(q), 0);
    assert_int_equal(tq_pop_min(q, NULL), VARLOG_ERR_END);
    free(want);
}

static void test_order_against_qsort(void **state)
{
    (void)state;
    rng_state = 1;
    enum { MAX = 5000 };
    tq_t *q = make(MAX);
    uint64_t *keys = malloc(MAX * sizeof(*keys));
    assert_non_null(keys);
    /* Every size to 130 (heaps of one to eight levels, full and partial last levels), then
     * larger ones; keys from 4 values (many duplicates), from 1,000, from all of uint64. */
    static const size_t big[] = {255, 256, 257, 1000, 1023, 1024, 4097, MAX};
    static const uint64_t ranges[] = {4, 1000, 0};
    for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
        for (size_t s = 0; s < 130 + sizeof(big) / sizeof(big[0]); s++) {
            size_t n = s < 130 ? s : big[s - 130];
            for (size_t i = 0; i < n; i++)
                keys[i] = ranges[r] ? rnd() % ranges[r] : rnd();
            check_sorts(q, keys, n);
        }
    }
    /* Already sorted, reversed, all equal, and the extremes of the key range. */
    for (size_t i = 0; i < MAX; i++)
        keys[i] = i;
    check_sorts(q, keys, MAX);
    for (size_t i = 0; i < MAX; i++)
        keys[i] = MAX - i;
    check_sorts(q, keys, MAX);
    for (size_t i = 0; i < MAX; i++)
        keys[i] = 7;
    check_sorts(q, keys, MAX);
    for (size_t i = 0; i < 100; i++)
        keys[i] = i % 2 ? UINT64_MAX : 0;
    check_sorts(q, keys, 100);
    free(keys);
    tq_destroy(q);
}

static void test_full_and_empty(void **state)
{
    (void)state;
    tq_t *q = make(3);
    tq_item_t it = {.glsn = 99, .val = 99};
    assert_int_equal(tq_pop_min(q, &it), VARLOG_ERR_END);
    assert_int_equal(tq_peek_min(q, &it), VARLOG_ERR_END);
    assert_int_equal(tq_replace_min(q, 1, 1, &it), VARLOG_ERR_END);
    assert_int_equal(it.glsn, 99); /* untouched on END */
    assert_int_equal(tq_size(q), 0);

    assert_int_equal(tq_push(q, 30, 3), VARLOG_OK);
    assert_int_equal(tq_push(q, 10, 1), VARLOG_OK);
    assert_int_equal(tq_push(q, 20, 2), VARLOG_OK);
    assert_int_equal(tq_push(q, 5, 0), VARLOG_ERR_QUEUE_FULL);
    assert_int_equal(tq_size(q), 3);
    assert_int_equal(tq_peek_min(q, &it), VARLOG_OK);
    assert_int_equal(it.glsn, 10); /* the refused 5 is not in */
    assert_int_equal(it.val, 1);
    assert_int_equal(tq_peek_min(q, NULL), VARLOG_ERR_INVALID_ARG);

    assert_int_equal(tq_pop_min(q, NULL), VARLOG_OK);
    assert_int_equal(tq_push(q, 5, 0), VARLOG_OK); /* room again */
    for (uint64_t want = 5; want <= 30; want += want == 5 ? 15 : 10) {
        assert_int_equal(tq_pop_min(q, &it), VARLOG_OK);
        assert_int_equal(it.glsn, want);
    }
    assert_int_equal(tq_pop_min(q, &it), VARLOG_ERR_END);
    tq_destroy(q);

    /* Capacity 0 refuses every push until tq_reserve, which keeps the items. */
    q = make(0);
    assert_int_equal(tq_push(q, 1, 1), VARLOG_ERR_QUEUE_FULL);
    assert_int_equal(tq_reserve(q, 2), VARLOG_OK);
    assert_int_equal(tq_capacity(q), 2);
    assert_int_equal(tq_push(q, 8, 8), VARLOG_OK);
    assert_int_equal(tq_push(q, 4, 4), VARLOG_OK);
    assert_int_equal(tq_push(q, 6, 6), VARLOG_ERR_QUEUE_FULL);
    assert_int_equal(tq_reserve(q, 1), VARLOG_OK); /* never shrinks */
    assert_int_equal(tq_capacity(q), 2);
    assert_int_equal(tq_reserve(q, 64), VARLOG_OK);
    assert_int_equal(tq_push(q, 6, 6), VARLOG_OK);
    for (uint64_t want = 4; want <= 8; want += 2) {
        assert_int_equal(tq_pop_min(q, &it), VARLOG_OK);
        assert_int_equal(it.glsn, want);
        assert_int_equal(it.val, want);
    }
    tq_destroy(q);

    assert_int_equal(tq_create(1, NULL), VARLOG_ERR_INVALID_ARG);
    q = (tq_t *)&it;
    assert_int_equal(tq_create(SIZE_MAX / 2, &q), VARLOG_ERR_NOMEM);
    assert_null(q);
    assert_int_equal(tq_reserve(NULL, 1), VARLOG_ERR_INVALID_ARG);
    tq_destroy(NULL);
}

static void test_reset(void **state)
{
    (void)state;
    tq_t *q = make(16);
    for (uint64_t i = 0; i < 16; i++)
        assert_int_equal(tq_push(q, 100 - i, i), VARLOG_OK);
    tq_reset(q);
    assert_int_equal(tq_size(q), 0);
    assert_int_equal(tq_capacity(q), 16);
    assert_int_equal(tq_pop_min(q, NULL), VARLOG_ERR_END);
    /* Refilled to its capacity, it holds the new items only. */
    for (uint64_t i = 0; i < 16; i++)
        assert_int_equal(tq_push(q, 200 + (i * 7) % 16, i), VARLOG_OK);
    assert_int_equal(tq_push(q, 1, 1), VARLOG_ERR_QUEUE_FULL);
    for (uint64_t want = 200; want < 216; want++) {
        tq_item_t it;
        assert_int_equal(tq_pop_min(q, &it), VARLOG_OK);
        assert_int_equal(it.glsn, want);
    }
    tq_destroy(q);
}

/* The heap's layout (transmit_queue.h): every item's parent, (i - 1) / TQ_ARITY, has no
 * greater GLSN. */
static void assert_heap(const tq_t *q)
{
    for (size_t i = 1; i < q->n; i++)
        if (q->a[(i - 1) / TQ_ARITY].glsn > q->a[i].glsn)
            fail_msg("heap order broken at %zu of %zu: parent %llu > %llu", i, q->n,
                     (unsigned long long)q->a[(i - 1) / TQ_ARITY].glsn,
                     (unsigned long long)q->a[i].glsn);
}

static int cmp_item(const void *a, const void *b)
{
    const tq_item_t *x = a, *y = b;
    if (x->glsn != y->glsn)
        return (x->glsn > y->glsn) - (x->glsn < y->glsn);
    return (x->val > y->val) - (x->val < y->val);
}

/* q's items, as a multiset, are want[0..n) (sorted by cmp_item); sorts a copy of q's items
 * into scratch. */
static void assert_items(const tq_t *q, const tq_item_t *want, size_t n, tq_item_t *scratch)
{
    assert_int_equal(q->n, n);
    for (size_t i = 0; i < n; i++)
        scratch[i] = q->a[i];
    qsort(scratch, n, sizeof(*scratch), cmp_item);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(scratch[i].glsn, want[i].glsn);
        assert_int_equal(scratch[i].val, want[i].val);
    }
}

/* Push, pop and replace_min on one heap with every key that makes the new item stop at each
 * level of its way (each GLSN present, one below and one above it, the extremes of the range):
 * a rise of zero, one, two (the levels push decides without branches) and more levels, stops
 * on ties with the parent or the grandparent, and a pop's hole ending at each leaf, including
 * below a node with fewer than TQ_ARITY children. After each call the layout is a heap and
 * holds exactly the items it should. Keys: even, so that odd ones fall between them; from a
 * few values too, for many ties. */
static void test_heap_every_rise(void **state)
{
    (void)state;
    rng_state = 5;
    enum { MAXN = 700 };
    static const size_t sizes[] = {0,  1,  2,  3,  4,  5,   6,   8,   16,  17,  20,
                                   21, 22, 64, 85, 86, 100, 341, 342, 343, MAXN};
    tq_t *q = make(MAXN + 1);
    tq_item_t *saved = malloc((MAXN + 1) * sizeof(*saved));
    tq_item_t *want = malloc((MAXN + 1) * sizeof(*want));
    tq_item_t *scratch = malloc((MAXN + 1) * sizeof(*scratch));
    uint64_t *cand = malloc((3 * MAXN + 2) * sizeof(*cand));
    assert_non_null(saved);
    assert_non_null(want);
    assert_non_null(scratch);
    assert_non_null(cand);
    size_t limit = test_under_valgrind() ? 100 : MAXN;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        if (n > limit)
            continue;
        for (int few = 0; few < 2; few++) {
            tq_reset(q);
            for (size_t i = 0; i < n; i++) {
                uint64_t g = 2 * (few ? rnd() % 5 + 1 : rnd() % (4 * n + 1) + 1);
                assert_int_equal(tq_push(q, g, i), VARLOG_OK);
                assert_heap(q);
            }
            for (size_t i = 0; i < n; i++)
                saved[i] = q->a[i];
            size_t nc = 0;
            for (size_t i = 0; i < n; i++) {
                cand[nc++] = saved[i].glsn - 1;
                cand[nc++] = saved[i].glsn;
                cand[nc++] = saved[i].glsn + 1;
            }
            cand[nc++] = 0;
            cand[nc++] = UINT64_MAX;
            for (size_t c = 0; c < nc; c++) {
                /* push */
                for (size_t i = 0; i < n; i++)
                    q->a[i] = want[i] = saved[i];
                q->n = n;
                assert_int_equal(tq_push(q, cand[c], n), VARLOG_OK);
                assert_heap(q);
                want[n] = (tq_item_t){cand[c], n};
                qsort(want, n + 1, sizeof(*want), cmp_item);
                assert_items(q, want, n + 1, scratch);
                if (n == 0)
                    continue;
                /* replace_min: the old minimum out, the key in */
                for (size_t i = 0; i < n; i++)
                    q->a[i] = want[i] = saved[i];
                q->n = n;
                tq_item_t old;
                assert_int_equal(tq_replace_min(q, cand[c], n, &old), VARLOG_OK);
                assert_heap(q);
                qsort(want, n, sizeof(*want), cmp_item);
                assert_int_equal(old.glsn, want[0].glsn);
                for (size_t i = 0; i < n; i++) /* drop the popped item, whichever tie it was */
                    if (want[i].glsn == old.glsn && want[i].val == old.val) {
                        want[i] = (tq_item_t){cand[c], n};
                        break;
                    }
                qsort(want, n, sizeof(*want), cmp_item);
                assert_items(q, want, n, scratch);
            }
            /* pop everything, checking the layout after each pop */
            for (size_t i = 0; i < n; i++)
                q->a[i] = saved[i];
            q->n = n;
            uint64_t last = 0;
            for (size_t left = n; left > 0; left--) {
                tq_item_t it;
                assert_int_equal(tq_pop_min(q, &it), VARLOG_OK);
                assert_true(it.glsn >= last);
                last = it.glsn;
                assert_heap(q);
                assert_int_equal(tq_size(q), left - 1);
            }
        }
    }
    /* Descending keys: every push rises to the root, past the branch-free levels. Ascending:
     * none rises. Then each drained with the layout checked. */
    for (int dir = 0; dir < 2; dir++) {
        tq_reset(q);
        for (size_t i = 0; i < limit; i++) {
            assert_int_equal(tq_push(q, dir ? i : limit - i, i), VARLOG_OK);
            assert_heap(q);
            tq_item_t it;
            assert_int_equal(tq_peek_min(q, &it), VARLOG_OK);
            assert_int_equal(it.glsn, dir ? 0 : limit - i);
            assert_int_equal(it.val, dir ? 0 : i);
        }
        for (size_t i = 0; i < limit; i++) {
            tq_item_t it;
            assert_int_equal(tq_pop_min(q, &it), VARLOG_OK);
            assert_int_equal(it.glsn, dir ? i : i + 1);
            assert_heap(q);
        }
    }
    free(cand);
    free(scratch);
    free(want);
    free(saved);
    tq_destroy(q);
}

/* Replacing the minimum by keys below, equal to and above every other key keeps the heap
 * ordered: the queue always pops what a sorted copy says. */
static void test_replace_min(void **state)
{
    (void)state;
    rng_state = 2;
    for (size_t n = 1; n <= 70; n++) {
        tq_t *q = make(n);
        uint64_t ref[70];
        for (size_t i = 0; i < n; i++) {
            ref[i] = rnd() % 50;
            assert_int_equal(tq_push(q, ref[i], i), VARLOG_OK);
        }
        for (int round = 0; round < 200; round++) {
            qsort(ref, n, sizeof(ref[0]), cmp_u64);
            uint64_t k = round % 3 == 0 ? 0 : rnd() % 60; /* 0: a new minimum */
            tq_item_t old;
            assert_int_equal(tq_replace_min(q, k, (uintptr_t)round, &old), VARLOG_OK);
            assert_int_equal(old.glsn, ref[0]);
            ref[0] = k;
            assert_int_equal(tq_size(q), n);
        }
        qsort(ref, n, sizeof(ref[0]), cmp_u64);
        for (size_t i = 0; i < n; i++) {
            tq_item_t it;
            assert_int_equal(tq_pop_min(q, &it), VARLOG_OK);
            assert_int_equal(it.glsn, ref[i]);
        }
        tq_destroy(q);
    }
}

/* k log streams, each holding increasing GLSNs: GLSNs 1..total dealt to streams at random
 * (so the streams have uneven lengths and some none), merged over their heads as the header
 * shows. The merge delivers exactly 1..total, in order, each from the stream that holds it. */
static void merge_once(size_t k, size_t total)
{
    uint64_t **s = calloc(k, sizeof(*s));
    size_t *len = calloc(k, sizeof(*len)), *pos = calloc(k, sizeof(*pos));
    uint32_t *owner = malloc((total + 1) * sizeof(*owner));
    assert_true(s && len && pos && owner);
    for (size_t i = 0; i < k; i++) {
        s[i] = malloc((total + 1) * sizeof(**s));
        assert_non_null(s[i]);
    }
    /* Streams at odd indexes (when k > 2) get a smaller share, some of them nothing. */
    for (uint64_t g = 1; g <= total; g++) {
        size_t i = rnd_below(k);
        if (k > 2 && i % 2 == 1 && (i % 6 == 1 || rnd() % 4 != 0))
            i = (i + 1) % k;
        s[i][len[i]++] = g;
        owner[g] = (uint32_t)i;
    }
    tq_t *q = make(k);
    for (size_t i = 0; i < k; i++)
        if (len[i] > 0)
            assert_int_equal(tq_push(q, s[i][0], i), VARLOG_OK);
    uint64_t want = 1;
    tq_item_t it;
    while (tq_peek_min(q, &it) == VARLOG_OK) {
        assert_int_equal(it.glsn, want);
        assert_int_equal(it.val, owner[want]);
        want++;
        size_t i = it.val;
        if (++pos[i] < len[i])
            assert_int_equal(tq_replace_min(q, s[i][pos[i]], i, NULL), VARLOG_OK);
        else
            assert_int_equal(tq_pop_min(q, NULL), VARLOG_OK);
    }
    assert_int_equal(want, total + 1);
    for (size_t i = 0; i < k; i++) {
        assert_int_equal(pos[i], len[i]);
        free(s[i]);
    }
    tq_destroy(q);
    free(s);
    free(len);
    free(pos);
    free(owner);
}

static void test_merge_k_streams(void **state)
{
    (void)state;
    rng_state = 3;
    for (size_t k = 1; k <= 64; k++)
        merge_once(k, (size_t)test_scale(2000, 4) + k * 13 % 97);
    merge_once(64, 0);
    merge_once(64, 10); /* most streams empty */
    merge_once(5, 1);
}

/* Random pushes, pops, peeks, replaces and resets, each checked against a plain array of
 * items scanned for its minimum: the popped item must be one the reference holds with the
 * least GLSN (equal GLSNs may come out in any order), and it leaves both. */
typedef struct ref {
    tq_item_t a[512];
    size_t n;
} ref_t;

static size_t ref_min(const ref_t *r)
{
    size_t m = 0;
    for (size_t i = 1; i < r->n; i++)
        if (r->a[i].glsn < r->a[m].glsn)
            m = i;
    return m;
}

/* Removes from r the item it (which must be there, with the least GLSN). */
static void ref_take(ref_t *r, tq_item_t it)
{
    size_t m = ref_min(r);
    assert_int_equal(it.glsn, r->a[m].glsn);
    for (size_t i = 0; i < r->n; i++) {
        if (r->a[i].glsn == it.glsn && r->a[i].val == it.val) {
            r->a[i] = r->a[--r->n];
            return;
        }
    }
    fail_msg("popped (%llu, %llu) which was never pushed", (unsigned long long)it.glsn,
             (unsigned long long)it.val);
}

static void test_differential(void **state)
{
    (void)state;
    rng_state = 4;
    enum { CAP = 512 };
    static ref_t ref;
    tq_t *q = make(CAP);
    long ops = test_scale(400000, 10);
    uintptr_t next_val = 0;
    for (long op = 0; op < ops; op++) {
        /* Phases that lean towards filling or draining, so that sizes span 0..CAP. */
        bool filling = (op / 5000) % 2 == 0;
        uint64_t range = (op / 20000) % 2 ? 16 : 1000000;
        unsigned what = (unsigned)(rnd() % 100);
        tq_item_t it;
        if (what < (filling ? 55u : 35u)) {
            uint64_t g = rnd() % range;
            varlog_err_t rc = tq_push(q, g, next_val);
            if (ref.n == CAP) {
                assert_int_equal(rc, VARLOG_ERR_QUEUE_FULL);
            } else {
                assert_int_equal(rc, VARLOG_OK);
                ref.a[ref.n++] = (tq_item_t){g, next_val};
            }
            next_val++;
        } else if (what < 80) {
            varlog_err_t rc = tq_pop_min(q, &it);
            assert_int_equal(rc, ref.n ? VARLOG_OK : VARLOG_ERR_END);
            if (rc == VARLOG_OK)
                ref_take(&ref, it);
        } else if (what < 90) {
            uint64_t g = rnd() % range;
            varlog_err_t rc = tq_replace_min(q, g, next_val, &it);
            assert_int_equal(rc, ref.n ? VARLOG_OK : VARLOG_ERR_END);
            if (rc == VARLOG_OK) {
                ref_take(&ref, it);
                ref.a[ref.n++] = (tq_item_t){g, next_val};
            }
            next_val++;
        } else if (what < 99) {
            varlog_err_t rc = tq_peek_min(q, &it);
            assert_int_equal(rc, ref.n ? VARLOG_OK : VARLOG_ERR_END);
            if (rc == VARLOG_OK)
                assert_int_equal(it.glsn, ref.a[ref_min(&ref)].glsn);
        } else if (rnd() % 50 == 0) {
            tq_reset(q);
            ref.n = 0;
        }
        assert_int_equal(tq_size(q), ref.n);
    }
    tq_destroy(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_against_qsort),
        cmocka_unit_test(test_full_and_empty),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_replace_min),
        cmocka_unit_test(test_heap_every_rise),
        cmocka_unit_test(test_merge_k_streams),
        cmocka_unit_test(test_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
