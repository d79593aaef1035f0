// libopapi_math: the math operator library that the official build recipe links. openaclnn's operators so far
// are all in libopapi_nn; this library holds only its version.
#include "acl/acl_base.h"

extern "C" ACL_FUNC_VISIBILITY const char *openaclnnOpapiMathVersion(void) { return "0.1.0"; }
