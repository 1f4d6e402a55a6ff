/* ACLs of the nodes a client creates (docs/acl.md): the presets, lists
 * given by the user, and the permission letters. */
#include <stdlib.h>
#include <string.h>

#include "../zkl.h"

void zkl_acl_free(struct ACL_vector *v) {
  int i;
  for (i = 0; v->data && i < v->count; i++) {
    free(v->data[i].id.scheme);
    free(v->data[i].id.id);
  }
  free(v->data);
  v->data = NULL;
  v->count = 0;
}

int zkl_acl_perms(const char *s) {
  int p = 0;
  for (; *s; s++) {
    switch (*s) {
    case 'c': p |= ZOO_PERM_CREATE; break;
    case 'd': p |= ZOO_PERM_DELETE; break;
    case 'r': p |= ZOO_PERM_READ; break;
    case 'w': p |= ZOO_PERM_WRITE; break;
    case 'a': p |= ZOO_PERM_ADMIN; break;
    default: return -1;
    }
  }
  return p;
}

static int acl_entry(struct ACL *e, int perms, const char *scheme,
                     const char *id) {
  e->perms = perms;
  e->id.scheme = strdup(scheme);
  e->id.id = strdup(id);
  return e->id.scheme && e->id.id;
}

/* open: anyone may do anything.  creator: only the identities the creating
 * session authenticated as.  read: those identities may do anything, and
 * anyone may read (list the queue, read owner data) but not create,
 * delete or write: lock directory and lock nodes alike, so that every
 * client with the creator's credentials can queue on the directory. */
int zkl_acl_preset(int preset, struct ACL_vector *out, zkl_error *err) {
  int ok, n = preset == ZKL_ACL_READ ? 2 : 1;
  out->data = calloc((size_t)n, sizeof *out->data);
  out->count = out->data ? n : 0;
  if (!out->data) ok = 0;
  else if (preset == ZKL_ACL_OPEN)
    ok = acl_entry(&out->data[0], ZOO_PERM_ALL, "world", "anyone");
  else
    ok = acl_entry(&out->data[0], ZOO_PERM_ALL, "auth", "") &&
         (preset != ZKL_ACL_READ ||
          acl_entry(&out->data[1], ZOO_PERM_READ, "world", "anyone"));
  if (ok) return 1;
  zkl_acl_free(out);
  zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  return 0;
}

int zkl_acl_copy(const struct ACL_vector *v, struct ACL_vector *out,
                 zkl_error *err) {
  int i;
  out->data = calloc((size_t)(v->count > 0 ? v->count : 1), sizeof *out->data);
  out->count = out->data ? v->count : 0;
  for (i = 0; out->data && i < v->count; i++)
    if (!acl_entry(&out->data[i], v->data[i].perms, v->data[i].id.scheme,
                   v->data[i].id.id)) break;
  if (out->data && i == v->count) return 1;
  zkl_acl_free(out);
  zkl_seterr(err, ZKL_EZK_ERROR, "out of memory");
  return 0;
}
