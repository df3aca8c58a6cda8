/*
 * fuzz_json.c - libFuzzer harness for the strict JSON parser (runtime/tr_json.c),
 * the parser of every safetensors header. The input is the JSON text. Besides
 * memory errors and undefined behaviour (ASan+UBSan), it checks what the
 * parser promises about an accepted document: node 0 is the root, children
 * link within the array and add up to count, strings and keys are
 * NUL-terminated at their length and fit in the input, tr_json_get finds the
 * first member with each key. A refused text must name "fuzz" and a byte.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "tr_json.h"

static void walk(const tr_json_doc *doc, const tr_json_node *n, size_t len, int depth)
{
    FUZZ_ASSERT(depth <= TR_JSON_MAX_DEPTH + 1, "depth %d", depth);
    if (n->type == TR_JSON_STRING)
        FUZZ_ASSERT(n->str && n->str[n->str_len] == '\0' && n->str_len <= len, "string of %zu bytes", n->str_len);
    if (n->type != TR_JSON_ARRAY && n->type != TR_JSON_OBJECT)
        return;
    int seen = 0;
    for (const tr_json_node *c = tr_json_first(doc, n); c; c = tr_json_next(doc, c)) {
        FUZZ_ASSERT(c >= doc->nodes && c < doc->nodes + doc->nnodes, "child outside the node array");
        if (n->type == TR_JSON_OBJECT) {
            FUZZ_ASSERT(c->key && c->key[c->key_len] == '\0' && c->key_len <= len, "key");
            if (seen < 64 && strlen(c->key) == c->key_len) { /* the first member with this key */
                const tr_json_node *g = tr_json_get(doc, n, c->key);
                FUZZ_ASSERT(g && strcmp(g->key, c->key) == 0 && g <= c, "tr_json_get");
            }
        } else {
            FUZZ_ASSERT(c->key == NULL, "array element with a key");
        }
        walk(doc, c, len, depth + 1);
        seen++;
    }
    FUZZ_ASSERT(seen == n->count, "count %d, children %d", n->count, seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tr_json_doc doc;
    tr_err err = {{0}};
    if (tr_json_parse(&doc, (const char *)data, size, "fuzz", &err)) {
        const tr_json_node *root = tr_json_root(&doc);
        FUZZ_ASSERT(root == &doc.nodes[0] && doc.nnodes >= 1, "root");
        walk(&doc, root, size, 0);
        tr_json_type_name(root->type);
    } else {
        FUZZ_ASSERT(strncmp(err.msg, "fuzz", 4) == 0, "message does not name the input: %s", err.msg);
    }
    tr_json_free(&doc);
    return 0;
}
