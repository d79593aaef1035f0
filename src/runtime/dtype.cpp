// Data type sizes and names, and the fp16 conversions of the public API.
#include "common/float_convert.h"
#include "runtime/runtime.h"

namespace openaclnn {

const char *DataTypeName(aclDataType type) {
    switch (type) {
        case ACL_DT_UNDEFINED: return "ACL_DT_UNDEFINED";
        case ACL_FLOAT: return "ACL_FLOAT";
        case ACL_FLOAT16: return "ACL_FLOAT16";
        case ACL_INT8: return "ACL_INT8";
        case ACL_INT32: return "ACL_INT32";
        case ACL_UINT8: return "ACL_UINT8";
        case ACL_INT16: return "ACL_INT16";
        case ACL_UINT16: return "ACL_UINT16";
        case ACL_UINT32: return "ACL_UINT32";
        case ACL_INT64: return "ACL_INT64";
        case ACL_UINT64: return "ACL_UINT64";
        case ACL_DOUBLE: return "ACL_DOUBLE";
        case ACL_BOOL: return "ACL_BOOL";
        case ACL_STRING: return "ACL_STRING";
        case ACL_COMPLEX64: return "ACL_COMPLEX64";
        case ACL_COMPLEX128: return "ACL_COMPLEX128";
        case ACL_BF16: return "ACL_BF16";
    }
    return "an unknown data type";
}

bool IsKnownDataType(aclDataType type) { return aclDataTypeSize(type) > 0 || type == ACL_STRING; }

const char *FormatName(aclFormat format) {
    switch (format) {
        case ACL_FORMAT_UNDEFINED: return "ACL_FORMAT_UNDEFINED";
        case ACL_FORMAT_NCHW: return "ACL_FORMAT_NCHW";
        case ACL_FORMAT_NHWC: return "ACL_FORMAT_NHWC";
        case ACL_FORMAT_ND: return "ACL_FORMAT_ND";
        case ACL_FORMAT_NC1HWC0: return "ACL_FORMAT_NC1HWC0";
        case ACL_FORMAT_FRACTAL_Z: return "ACL_FORMAT_FRACTAL_Z";
        case ACL_FORMAT_NC: return "ACL_FORMAT_NC";
        case ACL_FORMAT_NCL: return "ACL_FORMAT_NCL";
    }
    return "an unknown format";
}

}  // namespace openaclnn

extern "C" {

size_t aclDataTypeSize(aclDataType dataType) {
    switch (dataType) {
        case ACL_INT8:
        case ACL_UINT8:
        case ACL_BOOL:
            return 1;
        case ACL_FLOAT16:
        case ACL_BF16:
        case ACL_INT16:
        case ACL_UINT16:
            return 2;
        case ACL_FLOAT:
        case ACL_INT32:
        case ACL_UINT32:
            return 4;
        case ACL_INT64:
        case ACL_UINT64:
        case ACL_DOUBLE:
        case ACL_COMPLEX64:
            return 8;
        case ACL_COMPLEX128:
            return 16;
        default:
            return 0;
    }
}

float aclFloat16ToFloat(aclFloat16 value) { return openaclnn::HalfToFloat(value); }

aclFloat16 aclFloatToFloat16(float value) { return openaclnn::FloatToHalf(value); }

}  // extern "C"
