// Per-thread error messages (aclGetRecentErrMsg) and the formatting helpers every check uses.
#include <cstdio>
#include <string>

#include "runtime/runtime.h"

namespace openaclnn {

struct ThreadMessage {
    std::string text;
    bool present = false;
};

ThreadMessage &CurrentMessage() {
    thread_local ThreadMessage message;
    return message;
}

namespace {

std::string FormatV(const char *fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    const int length = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (length <= 0) return std::string();
    std::string text(static_cast<size_t>(length) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), fmt, args);
    text.resize(static_cast<size_t>(length));
    return text;
}

}  // namespace

void SetErrorMessage(const std::string &message) {
    ThreadMessage &current = CurrentMessage();
    current.text = message;
    current.present = true;
    Log(1, "%s", message.c_str());
}

std::string Format(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string text = FormatV(fmt, args);
    va_end(args);
    return text;
}

int Fail(int code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string text = FormatV(fmt, args);
    va_end(args);
    SetErrorMessage(text);
    return code;
}

}  // namespace openaclnn

extern "C" const char *aclGetRecentErrMsg(void) {
    const openaclnn::ThreadMessage &current = openaclnn::CurrentMessage();
    return current.present ? current.text.c_str() : nullptr;
}
