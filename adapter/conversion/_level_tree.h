/*
 * One side of one book's price levels, in order: O(log n) to find, insert or remove a level
 * wherever it goes, and a small side as fast as a sorted array.
 *
 * A side was a sorted array: a new best price went in at its front and moved every level
 * behind it, so a run of new best prices (or of new worst ones) cost O(n) each. A side is
 * now one of two shapes, behind one interface (position i counts from the best):
 *
 *   flat   up to LT_FLAT_MAX levels: a sorted array, as before. An insertion moves at most
 *          LT_FLAT_MAX levels -- a bound, not a share of the side -- and the shown book, read
 *          every message, is contiguous (a tree made the common small book ~25% slower to
 *          read: every level a dependent load).
 *   tree   past that: an AVL tree whose nodes count their subtree, so a level is reached
 *          by its position as well as by its price, and every operation -- the level at
 *          position i, insert or remove at i, the position of a price (bisection) -- walks
 *          one path of at most 1.44 log2(n + 2) nodes. The nodes are also a list in order
 *          (prev, next): the best k are read one link at a time from the first.
 *
 * Positions let both kinds of side share it: a price-keyed side (itch50's, fix44's) keeps
 * its levels sorted, best first, and finds them by price; a level-indexed one (fix44's 1023=)
 * inserts at a position.
 *
 * Strategy: a tree's nodes live in one array of its own (48 bytes a node, linked by 32-bit
 * indices), not an allocation each. A side turns into a tree when an insertion finds it
 * flat and full, and back into a flat array (or gives its tree's array back, rebuilt
 * balanced at twice its levels) when lt_trim finds it at a quarter of its room: memory
 * follows the side down as well as up. Nothing moves or shrinks but in lt_insert (which may
 * allocate) and lt_trim, so a change that must be undone (Fix44Run's undo log) puts a level
 * back where a removal took it without allocating: the room it left is still there. An
 * LtItem pointer is good until the next lt_insert or lt_trim. ``steps`` counts the tree
 * nodes operations visit (tests assert on it, never on time).
 */
#ifndef FEEDHA_LEVEL_TREE_H
#define FEEDHA_LEVEL_TREE_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int64_t key; /* sign * price: ascending is best first */
    int64_t size, count;
} Level; /* itch50's level: integer price units */

typedef struct {
    double price, size;
    int64_t orders;
} ShownLevel; /* fix44's level, and a shown level of either */

typedef union {
    Level level;
    ShownLevel shown;
} LtItem;

typedef uint32_t LtRef; /* a tree node: 1 + its slot in the side's array; 0 is none */

typedef struct {
    LtItem item;
    LtRef left, right; /* a free slot links the next free one through left */
    LtRef prev, next;  /* the levels in order (0 past either end) */
    uint32_t size;     /* nodes in this subtree */
    int32_t height;
} LtNode;

typedef struct {
    LtItem *flat;  /* the flat shape: levels [0, n), best first (NULL as a tree) */
    LtNode *nodes; /* the tree shape: node r at nodes[r - 1] (NULL when flat) */
    LtRef root, first, free;
    uint32_t n, cap, used; /* levels; slots allocated; tree slots ever handed out */
    uint64_t steps;        /* tree nodes visited so far (tests read it) */
} LevelTree;

#define LT_FLAT_MAX 64 /* the most levels a flat side holds */
#define LT_NODE(t, r) (&(t)->nodes[(r) - 1])

static inline uint32_t lt_count(const LevelTree *t) { return t->n; }
static inline uint32_t lt_size(const LevelTree *t, LtRef r) { return r ? LT_NODE(t, r)->size : 0; }
static inline int32_t lt_height(const LevelTree *t, LtRef r) { return r ? LT_NODE(t, r)->height : 0; }

/* ---- the tree shape ---- */

static inline void lt_fix(LevelTree *t, LtRef r) {
    LtNode *n = LT_NODE(t, r);
    int32_t l = lt_height(t, n->left), h = lt_height(t, n->right);
    n->size = 1 + lt_size(t, n->left) + lt_size(t, n->right);
    n->height = 1 + (l > h ? l : h);
}

static LtRef lt_rotate_right(LevelTree *t, LtRef y) {
    LtRef x = LT_NODE(t, y)->left;
    LT_NODE(t, y)->left = LT_NODE(t, x)->right;
    LT_NODE(t, x)->right = y;
    lt_fix(t, y);
    lt_fix(t, x);
    return x;
}

static LtRef lt_rotate_left(LevelTree *t, LtRef x) {
    LtRef y = LT_NODE(t, x)->right;
    LT_NODE(t, x)->right = LT_NODE(t, y)->left;
    LT_NODE(t, y)->left = x;
    lt_fix(t, x);
    lt_fix(t, y);
    return y;
}

/* ``r`` with its counts fixed and its subtrees' heights within one of each other. */
static LtRef lt_balance(LevelTree *t, LtRef r) {
    lt_fix(t, r);
    LtNode *n = LT_NODE(t, r);
    int32_t lean = lt_height(t, n->left) - lt_height(t, n->right);
    if (lean > 1) {
        LtNode *l = LT_NODE(t, n->left);
        if (lt_height(t, l->left) < lt_height(t, l->right)) n->left = lt_rotate_left(t, n->left);
        return lt_rotate_right(t, r);
    }
    if (lean < -1) {
        LtNode *h = LT_NODE(t, n->right);
        if (lt_height(t, h->right) < lt_height(t, h->left)) n->right = lt_rotate_right(t, n->right);
        return lt_rotate_left(t, r);
    }
    return r;
}

/* ``neighbors``: the last node the walk passed on its left (prev) and on its right (next). */
static LtRef lt_link_under(LevelTree *t, LtRef r, uint32_t index, LtRef node, LtRef neighbors[2]) {
    if (r == 0) {
        LtNode *n = LT_NODE(t, node);
        n->left = n->right = 0;
        n->size = 1;
        n->height = 1;
        return node;
    }
    t->steps++;
    uint32_t left = lt_size(t, LT_NODE(t, r)->left);
    if (index <= left) {
        neighbors[1] = r;
        LtRef under = lt_link_under(t, LT_NODE(t, r)->left, index, node, neighbors);
        LT_NODE(t, r)->left = under;
    } else {
        neighbors[0] = r;
        LtRef under = lt_link_under(t, LT_NODE(t, r)->right, index - left - 1, node, neighbors);
        LT_NODE(t, r)->right = under;
    }
    return lt_balance(t, r);
}

static void lt_link(LevelTree *t, uint32_t index, LtRef node) {
    LtRef neighbors[2] = {0, 0};
    t->root = lt_link_under(t, t->root, index, node, neighbors);
    LtNode *n = LT_NODE(t, node);
    n->prev = neighbors[0];
    n->next = neighbors[1];
    if (n->prev != 0) LT_NODE(t, n->prev)->next = node;
    else t->first = node;
    if (n->next != 0) LT_NODE(t, n->next)->prev = node;
}

static LtRef lt_take_first(LevelTree *t, LtRef r, LtRef *first) {
    t->steps++;
    LtNode *n = LT_NODE(t, r);
    if (n->left == 0) {
        *first = r;
        return n->right;
    }
    LtRef under = lt_take_first(t, n->left, first);
    LT_NODE(t, r)->left = under;
    return lt_balance(t, r);
}

static LtRef lt_unlink_under(LevelTree *t, LtRef r, uint32_t index, LtRef *gone) {
    t->steps++;
    LtNode *n = LT_NODE(t, r);
    uint32_t left = lt_size(t, n->left);
    if (index < left) {
        n->left = lt_unlink_under(t, n->left, index, gone);
    } else if (index > left) {
        n->right = lt_unlink_under(t, n->right, index - left - 1, gone);
    } else {
        *gone = r;
        if (n->left == 0) return n->right;
        if (n->right == 0) return n->left;
        LtRef first = 0;
        LtRef right = lt_take_first(t, n->right, &first);
        LT_NODE(t, first)->left = n->left;
        LT_NODE(t, first)->right = right;
        return lt_balance(t, first);
    }
    return lt_balance(t, r);
}

/* The balanced tree over slots [lo, hi] (1-based, in order; their list is the caller's). */
static LtRef lt_build(LevelTree *t, uint32_t lo, uint32_t hi) {
    if (lo > hi) return 0;
    LtRef mid = lo + (hi - lo) / 2;
    LtNode *n = LT_NODE(t, mid);
    n->left = mid > lo ? lt_build(t, lo, mid - 1) : 0;
    n->right = lt_build(t, mid + 1, hi);
    lt_fix(t, mid);
    return mid;
}

/* ---- either shape ---- */

/* Iteration in order from the first (best) level: lt_first, then lt_next until NULL. */
typedef struct {
    const LevelTree *tree;
    uint32_t at; /* flat: the index; a tree: the node */
} LtIter;

static inline void lt_first(const LevelTree *t, LtIter *it) {
    it->tree = t;
    it->at = t->flat != NULL ? 0 : t->first;
}

static inline LtItem *lt_next(LtIter *it) {
    const LevelTree *t = it->tree;
    if (t->flat != NULL) return it->at < t->n ? &t->flat[it->at++] : NULL;
    if (it->at == 0) return NULL;
    LtNode *n = LT_NODE(t, it->at);
    it->at = n->next;
    return &n->item;
}

static void lt_clear(LevelTree *t) {
    PyMem_Free(t->flat);
    PyMem_Free(t->nodes);
    t->flat = NULL;
    t->nodes = NULL;
    t->root = t->first = t->free = 0;
    t->n = t->cap = t->used = 0;
}

/* Lay ``n`` levels, in order from ``it``, into ``nodes`` (room for ``cap``) as a balanced tree. */
static void lt_plant(LevelTree *t, LtIter *it, LtNode *nodes, uint32_t n, uint32_t cap) {
    for (uint32_t i = 0; i < n; i++) {
        nodes[i].item = *lt_next(it);
        nodes[i].prev = i; /* slot i + 1's neighbors: slots i and i + 2 */
        nodes[i].next = i + 1 < n ? i + 2 : 0;
    }
    PyMem_Free(t->flat);
    PyMem_Free(t->nodes);
    t->flat = NULL;
    t->nodes = nodes;
    t->cap = cap;
    t->used = n;
    t->free = 0;
    t->first = n ? 1 : 0;
    t->root = lt_build(t, 1, n);
}

/* Room for one more level: 0, or -1 with MemoryError (nothing changed). A full flat side
 * becomes a tree; a full tree's array doubles. */
static int lt_reserve(LevelTree *t) {
    if (t->n == UINT32_MAX / 2) {
        PyErr_NoMemory();
        return -1;
    }
    if (t->nodes == NULL && (t->n < t->cap || t->n < LT_FLAT_MAX)) {
        if (t->n < t->cap) return 0;
        uint32_t cap = t->cap ? t->cap * 2 : 4;
        LtItem *flat = PyMem_Realloc(t->flat, (size_t)(cap > LT_FLAT_MAX ? LT_FLAT_MAX : cap) * sizeof *flat);
        if (flat == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->flat = flat;
        t->cap = cap > LT_FLAT_MAX ? LT_FLAT_MAX : cap;
        return 0;
    }
    if (t->nodes == NULL) { /* flat and full: a tree of the same levels, with room to grow */
        LtNode *nodes = PyMem_Malloc((size_t)t->n * 2 * sizeof *nodes);
        if (nodes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        LtIter it;
        lt_first(t, &it);
        lt_plant(t, &it, nodes, t->n, t->n * 2);
        return 0;
    }
    if (t->free != 0 || t->used < t->cap) return 0;
    LtNode *nodes = PyMem_Realloc(t->nodes, (size_t)t->cap * 2 * sizeof *nodes);
    if (nodes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->nodes = nodes;
    t->cap *= 2;
    return 0;
}

/* Insert ``item`` at ``index`` (0..count): 0, or -1 with MemoryError (nothing changed). */
static int lt_insert(LevelTree *t, uint32_t index, const LtItem *item) {
    if (lt_reserve(t) < 0) return -1;
    if (t->nodes == NULL) {
        memmove(&t->flat[index + 1], &t->flat[index], (size_t)(t->n - index) * sizeof *t->flat);
        t->flat[index] = *item;
    } else {
        LtRef r = t->free;
        if (r != 0) t->free = LT_NODE(t, r)->left;
        else r = ++t->used;
        LT_NODE(t, r)->item = *item;
        lt_link(t, index, r);
    }
    t->n++;
    return 0;
}

/* Insert where a removal left room (an undo): cannot fail. */
static void lt_put_back(LevelTree *t, uint32_t index, const LtItem *item) {
    int rc = lt_insert(t, index, item); /* the room is there: no allocation */
    (void)rc;
}

/* Remove the level at ``index`` (< count). Its room stays until lt_trim. */
static void lt_remove(LevelTree *t, uint32_t index) {
    if (t->nodes == NULL) {
        memmove(&t->flat[index], &t->flat[index + 1], (size_t)(t->n - index - 1) * sizeof *t->flat);
    } else {
        LtRef gone = 0;
        t->root = lt_unlink_under(t, t->root, index, &gone);
        LtNode *n = LT_NODE(t, gone);
        if (n->prev != 0) LT_NODE(t, n->prev)->next = n->next;
        else t->first = n->next;
        if (n->next != 0) LT_NODE(t, n->next)->prev = n->prev;
        n->left = t->free;
        t->free = gone;
    }
    t->n--;
}

/* Memory back once a side holds little: empty, it holds nothing; a tree of at most
 * LT_FLAT_MAX / 2 levels becomes flat; a tree or flat array at a quarter of its room is
 * rebuilt at twice its levels. Nothing happens when memory is short. */
static void lt_trim(LevelTree *t) {
    uint32_t n = t->n;
    if (n == 0) {
        lt_clear(t);
        return;
    }
    if (t->nodes == NULL) {
        if (t->cap <= 8 || (uint64_t)n * 4 >= t->cap) return;
        LtItem *flat = PyMem_Realloc(t->flat, (size_t)n * 2 * sizeof *flat);
        if (flat != NULL) { /* PyMem_Realloc sets no exception: the array just stays as large */
            t->flat = flat;
            t->cap = n * 2;
        }
        return;
    }
    LtIter it;
    lt_first(t, &it);
    if (n <= LT_FLAT_MAX / 2) {
        LtItem *flat = PyMem_Malloc((size_t)LT_FLAT_MAX * sizeof *flat);
        if (flat == NULL) return;
        for (uint32_t i = 0; i < n; i++) flat[i] = *lt_next(&it);
        PyMem_Free(t->nodes);
        t->nodes = NULL;
        t->flat = flat;
        t->cap = LT_FLAT_MAX;
        t->root = t->first = t->free = 0;
        t->used = 0;
        return;
    }
    if ((uint64_t)n * 4 >= t->cap) return;
    LtNode *nodes = PyMem_Malloc((size_t)n * 2 * sizeof *nodes);
    if (nodes != NULL) lt_plant(t, &it, nodes, n, n * 2);
}

/* The level at ``index``, or NULL past the end. */
static LtItem *lt_at(LevelTree *t, uint32_t index) {
    if (index >= t->n) return NULL;
    if (t->nodes == NULL) return &t->flat[index];
    if (index == 0) return &LT_NODE(t, t->first)->item;
    LtRef r = t->root;
    while (r != 0) {
        t->steps++;
        LtNode *n = LT_NODE(t, r);
        uint32_t left = lt_size(t, n->left);
        if (index == left) return &n->item;
        if (index < left) {
            r = n->left;
        } else {
            index -= left + 1;
            r = n->right;
        }
    }
    return NULL;
}

/* In a side sorted by ``cmp`` (item against key: <0 before, 0 at, >0 after; keys unique): the
 * level of ``key`` or NULL, and in *index its position or where it would go (bisect_left). */
static inline LtItem *lt_search(LevelTree *t, int (*cmp)(const LtItem *, const void *), const void *key,
                                uint32_t *index) {
    if (t->nodes == NULL) {
        uint32_t lo = 0, hi = t->n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cmp(&t->flat[mid], key) < 0) lo = mid + 1;
            else hi = mid;
        }
        *index = lo;
        return lo < t->n && cmp(&t->flat[lo], key) == 0 ? &t->flat[lo] : NULL;
    }
    LtRef r = t->root;
    uint32_t at = 0;
    while (r != 0) {
        t->steps++;
        LtNode *n = LT_NODE(t, r);
        int order = cmp(&n->item, key);
        if (order == 0) {
            *index = at + lt_size(t, n->left);
            return &n->item;
        }
        if (order < 0) {
            at += lt_size(t, n->left) + 1;
            r = n->right;
        } else {
            r = n->left;
        }
    }
    *index = at;
    return NULL;
}

/* The tree's height (0 when flat or empty: a flat side walks no path). */
static inline int32_t lt_tree_height(const LevelTree *t) { return t->nodes == NULL ? 0 : lt_height(t, t->root); }

/* Bytes held beyond the LevelTree itself. */
static inline size_t lt_bytes(const LevelTree *t) {
    return (size_t)t->cap * (t->nodes != NULL ? sizeof(LtNode) : sizeof(LtItem));
}

#endif /* FEEDHA_LEVEL_TREE_H */
