/*
 * LD_PRELOAD shim for the official example test. The sample fills its output buffer with the expected answer
 * before calling the operator, so a kernel that wrote nothing would still print the right numbers. This shim
 * interposes aclrtMemcpy and, when a host-to-device copy carries exactly those six floats, copies NaNs instead,
 * then says so on stderr (the test checks that it did).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"

typedef aclError (*MemcpyFn)(void *, size_t, const void *, size_t, aclrtMemcpyKind);

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
    static MemcpyFn real = NULL;
    if (!real) real = (MemcpyFn)dlsym(RTLD_NEXT, "aclrtMemcpy");
    static const float expected[6] = {-0.0091f, 0.0409f, 0.0409f, -0.0091f, 0.0409f, 0.0409f};
    if (kind == ACL_MEMCPY_HOST_TO_DEVICE && count == sizeof expected && src &&
        memcmp(src, expected, sizeof expected) == 0) {
        float poison[6];
        for (int i = 0; i < 6; ++i) poison[i] = nanf("");
        fprintf(stderr, "poison-shim: output buffer filled with NaN instead of the expected values\n");
        return real(dst, destMax, poison, count, kind);
    }
    return real(dst, destMax, src, count, kind);
}
