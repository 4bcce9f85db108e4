// DeviceLine: requests take the device one at a time in arrival order, waiters learn their place,
// and a waiter that gives up leaves the line without taking the device.
#include "device_line.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace tinycoral::serve {
namespace {

using namespace std::chrono_literals;

TEST(DeviceLine, AWaiterSeesItsPlaceAndGetsTheDeviceWhenTheHolderIsDone) {
  DeviceLine line;
  auto first = std::make_unique<DeviceLine::Turn>(line.wait([](size_t) { return true; }));
  ASSERT_TRUE(*first);
  std::vector<size_t> places;
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    DeviceLine::Turn t = line.wait(
        [&](size_t place) {
          places.push_back(place);
          return true;
        },
        10ms);
    got = bool(t);
  });
  while (line.length() < 2) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(got);
  first.reset();  // the holder is done
  waiter.join();
  EXPECT_TRUE(got);
  ASSERT_FALSE(places.empty());
  for (size_t p : places) EXPECT_EQ(p, 1u);
  EXPECT_EQ(line.length(), 0u);
}

TEST(DeviceLine, RequestsAreServedInArrivalOrder) {
  DeviceLine line;
  auto holder = std::make_unique<DeviceLine::Turn>(line.wait([](size_t) { return true; }));
  std::vector<int> order;
  std::mutex m;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] {
      DeviceLine::Turn t = line.wait([](size_t) { return true; }, 5ms);
      std::lock_guard lock(m);
      order.push_back(i);
    });
    while (line.length() < size_t(i) + 2) std::this_thread::sleep_for(1ms);  // arrive in order
  }
  holder.reset();
  for (auto& w : waiters) w.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(DeviceLine, AWaiterThatGivesUpLeavesTheLine) {
  DeviceLine line;
  auto holder = std::make_unique<DeviceLine::Turn>(line.wait([](size_t) { return true; }));
  int calls = 0;
  DeviceLine::Turn gave_up = line.wait(
      [&](size_t place) {
        EXPECT_EQ(place, 1u);
        return ++calls < 3;  // the client is gone on the third look
      },
      1ms);
  EXPECT_FALSE(gave_up);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(line.length(), 1u);  // only the holder
  holder.reset();
  EXPECT_TRUE(line.wait([](size_t) { return true; }));  // the device is free at once
}

}  // namespace
}  // namespace tinycoral::serve
