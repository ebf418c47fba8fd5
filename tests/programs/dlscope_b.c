/* libdlscope_b: the dependency of libdlscope_a (tests/programs/dlscope.c), loaded only in
 * libdlscope_a's local scope. Its symbols carry a version (dlscope_b.map) for dlvsym. */
const char *dlscope_who(void);
int dlscope_b_func(void);

const char *dlscope_who(void) { return "b"; }
int dlscope_b_func(void) { return 42; }
