// main() of every test executable: one aclInit + aclrtSetDevice(0) + stream per process (a gtest Environment),
// or, when started as `exe --probe NAME ARGS...`, one registered probe (a child process of a test that needs a
// fresh runtime or a different environment, e.g. another OPENACLNN_NUM_THREADS).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "acl_helpers.h"

namespace openaclnn::test {
int RunRegisteredProbe(const std::string &name, const std::vector<std::string> &args);

namespace {
aclrtStream g_stream = nullptr;

class AclEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
        ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
        ASSERT_EQ(aclrtCreateStream(&g_stream), ACL_SUCCESS);
    }
    void TearDown() override {
        EXPECT_EQ(aclrtDestroyStream(g_stream), ACL_SUCCESS);
        EXPECT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
        EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
    }
};
}  // namespace

aclrtStream TestStream() { return g_stream; }

}  // namespace openaclnn::test

int main(int argc, char **argv) {
    if (argc >= 3 && std::string(argv[1]) == "--probe") {
        std::vector<std::string> args(argv + 3, argv + argc);
        return openaclnn::test::RunRegisteredProbe(argv[2], args);
    }
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new openaclnn::test::AclEnvironment);
    return RUN_ALL_TESTS();
}
