// The message of the E that f() throws; a test failure when it throws nothing or another type.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace wgrt::test {

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

}  // namespace wgrt::test
