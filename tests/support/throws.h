// What a test expects a call to throw: message_of<E> (a failure when it throws nothing or
// another type) and error_of (any exception's message, "" when it throws none).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>

namespace wgrt::test {

// The message of the E that f() throws; a test failure when it throws nothing or another type.
template <class E>
std::string message_of(auto&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

// The message of whatever f() throws, "" when it returns.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace wgrt::test
