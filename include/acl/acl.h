/*
 * openaclnn: umbrella header of the ACL runtime.
 */
#ifndef OPENACLNN_ACL_ACL_H_
#define OPENACLNN_ACL_ACL_H_

#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_MAJOR_VERSION 1
#define ACL_MINOR_VERSION 0
#define ACL_PATCH_VERSION 0

/* configPath may be NULL. A second aclInit without aclFinalize is ACL_ERROR_REPEAT_INITIALIZE. */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
/* Waits for queued work on every stream. A second aclFinalize is ACL_ERROR_REPEAT_FINALIZE. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* OPENACLNN_ACL_ACL_H_ */
