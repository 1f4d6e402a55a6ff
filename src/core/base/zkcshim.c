/* What the static ZooKeeper C client of the TLS build needs from us
 * (docs/security.md, "Builds"): 3.8.0 calls FIPS_mode(), which OpenSSL 3
 * removed.  Linked into both modules (zklock.core, zklock.testing.core),
 * hidden in each. */
#ifdef ZKL_STATIC_ZKC
#include <openssl/evp.h>

int FIPS_mode(void);
int FIPS_mode(void) { return EVP_default_properties_is_fips_enabled(NULL); }
#else
typedef int zkl_zkcshim_empty; /* (ISO C wants something in a file) */
#endif
