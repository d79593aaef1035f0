// Example of aclnnCrossEntropyLoss, the forward of aclnnCrossEntropyLossGrad, written for openaclnn in the style of
// the gradient's official sample: Init, CreateAclTensor, the two phases, synchronize, print.
// The output buffers start out filled with 7.0 (not an answer), so every printed value was written by the operator.
#include <iostream>
#include <vector>
#include "acl/acl.h"
#include "aclnnop/aclnn_cross_entropy_loss.h"

#define CHECK_RET(cond, return_expr) \
  do {                               \
    if (!(cond)) {                   \
      return_expr;                   \
    }                                \
  } while (0)

#define LOG_PRINT(message, ...)     \
  do {                              \
    printf(message, ##__VA_ARGS__); \
  } while (0)

int64_t GetShapeSize(const std::vector<int64_t>& shape) {
  int64_t shapeSize = 1;
  for (auto i : shape) {
    shapeSize *= i;
  }
  return shapeSize;
}

int Init(int32_t deviceId, aclrtStream* stream) {
  // Boilerplate for resource initialization.
  auto ret = aclInit(nullptr);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclInit failed. ERROR: %d\n", ret); return ret);
  ret = aclrtSetDevice(deviceId);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSetDevice failed. ERROR: %d\n", ret); return ret);
  ret = aclrtCreateStream(stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtCreateStream failed. ERROR: %d\n", ret); return ret);
  return 0;
}

template <typename T>
int CreateAclTensor(const std::vector<T>& hostData, const std::vector<int64_t>& shape, void** deviceAddr,
                    aclDataType dataType, aclTensor** tensor) {
  auto size = GetShapeSize(shape) * sizeof(T);
  // Call aclrtMalloc to apply for device-side memory.
  auto ret = aclrtMalloc(deviceAddr, size, ACL_MEM_MALLOC_HUGE_FIRST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMalloc failed. ERROR: %d\n", ret); return ret);

  // Call aclrtMemcpy to copy host-side data to device-side memory.
  ret = aclrtMemcpy(*deviceAddr, size, hostData.data(), size, ACL_MEMCPY_HOST_TO_DEVICE);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMemcpy failed. ERROR: %d\n", ret); return ret);

  // Calculate the strides of a contiguous tensor.
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = shape.size() - 2; i >= 0; i--) {
    strides[i] = shape[i + 1] * strides[i + 1];
  }

  // Call the aclCreateTensor API to create an aclTensor.
  *tensor = aclCreateTensor(shape.data(), shape.size(), dataType, strides.data(), 0, aclFormat::ACL_FORMAT_ND,
                            shape.data(), shape.size(), *deviceAddr);
  return 0;
}

int main() {
  // 1. (Boilerplate) Initialize the device/stream.
  int32_t deviceId = 0;
  aclrtStream stream;
  auto ret = Init(deviceId, &stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("Init acl failed. ERROR: %d\n", ret); return ret);

  // 2. Construct the inputs and outputs.
  std::vector<int64_t> inputShape = {2, 3};
  std::vector<int64_t> targetShape = {2,};
  std::vector<int64_t> weightShape = {3,};
  std::vector<int64_t> lossShape = {};          // "mean": a 0-D loss
  std::vector<int64_t> logProbShape = {2, 3};
  std::vector<int64_t> zlossShape = {};         // shaped as the loss; not written while returnZloss is false
  std::vector<int64_t> lseShape = {2,};         // the row log-sum-exp, as aclnnCrossEntropyLossGrad consumes it
  void* inputDeviceAddr = nullptr;
  void* targetDeviceAddr = nullptr;
  void* weightDeviceAddr = nullptr;
  void* lossDeviceAddr = nullptr;
  void* logProbDeviceAddr = nullptr;
  void* zlossDeviceAddr = nullptr;
  void* lseDeviceAddr = nullptr;
  aclTensor* input = nullptr;
  aclTensor* target = nullptr;
  aclTensor* weight = nullptr;
  aclTensor* lossOut = nullptr;
  aclTensor* logProbOut = nullptr;
  aclTensor* zlossOut = nullptr;
  aclTensor* lseForZlossOut = nullptr;
  std::vector<float> inputHostData = {0.5, 1.0, -1.5, 2.0, 0.0, 1.0};
  std::vector<int64_t> targetHostData = {0, 2};
  std::vector<float> weightHostData = {1.0, 1.0, 1.0};
  // The outputs start as 7.0, which is not an answer: what is printed below was written by the operator.
  std::vector<float> lossHostData = {7.0};
  std::vector<float> logProbHostData = {7.0, 7.0, 7.0, 7.0, 7.0, 7.0};
  std::vector<float> zlossHostData = {7.0};
  std::vector<float> lseHostData = {7.0, 7.0};
  char reduction[] = "mean";
  int64_t ignoreIndex = -100;
  double labelSmoothing = 0.0;
  double lseSquareScaleForZloss = 0.0;
  bool returnZloss = false;

  ret = CreateAclTensor(inputHostData, inputShape, &inputDeviceAddr, aclDataType::ACL_FLOAT, &input);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(targetHostData, targetShape, &targetDeviceAddr, aclDataType::ACL_INT64, &target);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(weightHostData, weightShape, &weightDeviceAddr, aclDataType::ACL_FLOAT, &weight);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(lossHostData, lossShape, &lossDeviceAddr, aclDataType::ACL_FLOAT, &lossOut);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(logProbHostData, logProbShape, &logProbDeviceAddr, aclDataType::ACL_FLOAT, &logProbOut);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(zlossHostData, zlossShape, &zlossDeviceAddr, aclDataType::ACL_FLOAT, &zlossOut);
  CHECK_RET(ret == ACL_SUCCESS, return ret);
  ret = CreateAclTensor(lseHostData, lseShape, &lseDeviceAddr, aclDataType::ACL_FLOAT, &lseForZlossOut);
  CHECK_RET(ret == ACL_SUCCESS, return ret);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor;

  // 3. Call the first-phase API of aclnnCrossEntropyLoss.
  ret = aclnnCrossEntropyLossGetWorkspaceSize(input, target, weight, reduction, ignoreIndex, labelSmoothing,
                                              lseSquareScaleForZloss, returnZloss, lossOut, logProbOut, zlossOut,
                                              lseForZlossOut, &workspaceSize, &executor);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnCrossEntropyLossGetWorkspaceSize failed. ERROR: %d\n", ret); return ret);
  // Apply for device memory based on the workspaceSize calculated by the first-phase API.
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) {
    ret = aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("allocate workspace failed. ERROR: %d\n", ret); return ret);
  }
  // Call the second-phase API of aclnnCrossEntropyLoss.
  ret = aclnnCrossEntropyLoss(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclnnCrossEntropyLoss failed. ERROR: %d\n", ret); return ret);

  // 4. (Boilerplate) Synchronize and wait for task execution to complete.
  ret = aclrtSynchronizeStream(stream);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", ret); return ret);

  // 5. Copy the results from the device to the host and print them.
  float lossResult = 0;
  ret = aclrtMemcpy(&lossResult, sizeof(lossResult), lossDeviceAddr, sizeof(lossResult), ACL_MEMCPY_DEVICE_TO_HOST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy loss from device to host failed. ERROR: %d\n", ret); return ret);
  LOG_PRINT("loss is: %f\n", lossResult);
  auto size = GetShapeSize(logProbShape);
  std::vector<float> logProbResult(size, 0);
  ret = aclrtMemcpy(logProbResult.data(), logProbResult.size() * sizeof(logProbResult[0]), logProbDeviceAddr,
                    size * sizeof(logProbResult[0]), ACL_MEMCPY_DEVICE_TO_HOST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy logProb from device to host failed. ERROR: %d\n", ret); return ret);
  for (int64_t i = 0; i < size; i++) {
    LOG_PRINT("logProb[%ld] is: %f\n", i, logProbResult[i]);
  }
  std::vector<float> lseResult(2, 0);
  ret = aclrtMemcpy(lseResult.data(), lseResult.size() * sizeof(lseResult[0]), lseDeviceAddr,
                    lseResult.size() * sizeof(lseResult[0]), ACL_MEMCPY_DEVICE_TO_HOST);
  CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy lse from device to host failed. ERROR: %d\n", ret); return ret);
  for (size_t i = 0; i < lseResult.size(); i++) {
    LOG_PRINT("lseForZloss[%zu] is: %f\n", i, lseResult[i]);
  }

  // 6. Release the aclTensors.
  aclDestroyTensor(input);
  aclDestroyTensor(target);
  aclDestroyTensor(weight);
  aclDestroyTensor(lossOut);
  aclDestroyTensor(logProbOut);
  aclDestroyTensor(zlossOut);
  aclDestroyTensor(lseForZlossOut);

  // 7. Release device resources.
  aclrtFree(inputDeviceAddr);
  aclrtFree(targetDeviceAddr);
  aclrtFree(weightDeviceAddr);
  aclrtFree(lossDeviceAddr);
  aclrtFree(logProbDeviceAddr);
  aclrtFree(zlossDeviceAddr);
  aclrtFree(lseDeviceAddr);
  if (workspaceSize > 0) {
    aclrtFree(workspaceAddr);
  }
  aclrtDestroyStream(stream);
  aclrtResetDevice(deviceId);
  aclFinalize();
  return 0;
}
