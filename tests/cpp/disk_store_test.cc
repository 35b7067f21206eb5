// Tests for the on-disk kernel store (cache/disk_store.h) and content hashing (cache/content_hash.h):
// round trips, corrupt/untrusted entries, unusable directories, and concurrent writers of one key.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/content_hash.h"
#include "cache/disk_store.h"
#include "core/stats.h"

namespace metajit {
namespace {

namespace filesystem = std::filesystem;

const std::string kKey = "0123456789abcdef0123456789abcdef";

class DiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/metajit-disk-store-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    filesystem::permissions(root_, filesystem::perms::owner_all, ignored);
    filesystem::remove_all(root_, ignored);
  }
  std::string entry_path(const std::string& directory, const std::string& key) const {
    return directory + "/" + key.substr(0, 2) + "/" + key + ".mjk";
  }
  static std::string read_bytes(const std::string& path) {
    std::ifstream stream(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(stream), {});
  }
  static void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream stream(path, std::ios::binary | std::ios::trunc);
    stream << bytes;
  }
  std::string root_;
};

TEST_F(DiskStoreTest, StoreLoadRoundTrip) {
  DiskStore store(root_ + "/cache");
  ASSERT_TRUE(store.enabled());
  EXPECT_EQ(store.directory(), root_ + "/cache");
  std::string payload("object\0bytes\xff\x7f" "ELF", 17);
  EXPECT_FALSE(store.load(kKey).has_value());
  ASSERT_TRUE(store.store(kKey, payload));
  auto loaded = store.load(kKey);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, payload);
  ASSERT_TRUE(store.store("ab", ""));  // empty payload is legal
  EXPECT_EQ(store.load("ab").value_or("missing"), "");
  EXPECT_EQ(store.entry_count(), 2u);
  EXPECT_EQ(store.keys(), (std::vector<std::string>{kKey, "ab"}));
  EXPECT_TRUE(filesystem::exists(entry_path(root_ + "/cache", kKey)));
  // A second store object over the same folder (another process, later) sees the entries.
  EXPECT_EQ(DiskStore(root_ + "/cache").load(kKey).value_or(""), payload);
}

TEST_F(DiskStoreTest, LargePayloadRoundTrip) {
  DiskStore store(root_);
  std::string payload(3 << 20, '\0');
  for (size_t index = 0; index < payload.size(); ++index) payload[index] = static_cast<char>(index * 2654435761u >> 13);
  ASSERT_TRUE(store.store(kKey, payload));
  EXPECT_EQ(store.load(kKey).value_or(""), payload);
}

TEST_F(DiskStoreTest, FlippedPayloadByteIsDiscarded) {
  DiskStore store(root_);
  ASSERT_TRUE(store.store(kKey, std::string(1000, 'k')));
  std::string path = entry_path(root_, kKey);
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 10] ^= 0x01;
  write_bytes(path, bytes);
  int64_t discarded_before = stats().cache_entries_discarded.load();
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_FALSE(filesystem::exists(path));
  EXPECT_EQ(stats().cache_entries_discarded.load(), discarded_before + 1);
  EXPECT_TRUE(store.enabled());  // a bad entry is not a bad store
  ASSERT_TRUE(store.store(kKey, "rebuilt"));
  EXPECT_EQ(store.load(kKey).value_or(""), "rebuilt");
}

TEST_F(DiskStoreTest, TruncatedEntryIsDiscarded) {
  DiskStore store(root_);
  ASSERT_TRUE(store.store(kKey, std::string(1000, 'k')));
  std::string path = entry_path(root_, kKey);
  for (size_t length : {size_t(600), size_t(24), size_t(10), size_t(0)}) {
    ASSERT_TRUE(store.store(kKey, std::string(1000, 'k')));
    filesystem::resize_file(path, length);
    int64_t discarded_before = stats().cache_entries_discarded.load();
    EXPECT_FALSE(store.load(kKey).has_value()) << "length " << length;
    EXPECT_FALSE(filesystem::exists(path)) << "length " << length;
    EXPECT_EQ(stats().cache_entries_discarded.load(), discarded_before + 1);
  }
}

TEST_F(DiskStoreTest, GarbageAndWrongHeaderEntriesAreDiscarded) {
  DiskStore store(root_);
  std::string path = entry_path(root_, kKey);
  filesystem::create_directories(root_ + "/" + kKey.substr(0, 2));
  std::string valid;
  {
    ASSERT_TRUE(store.store(kKey, "payload"));
    valid = read_bytes(path);
  }
  std::string wrong_version = valid;
  wrong_version[4] = 9;
  std::string wrong_length = valid;
  wrong_length[8] = 100;
  std::vector<std::string> bad_files = {"complete garbage that is long enough to hold a header", "MJK", wrong_version,
                                        wrong_length, "XJK1" + valid.substr(4)};
  for (const std::string& bytes : bad_files) {
    write_bytes(path, bytes);
    ::chmod(path.c_str(), 0600);
    EXPECT_FALSE(store.load(kKey).has_value());
    EXPECT_FALSE(filesystem::exists(path));
  }
}

TEST_F(DiskStoreTest, GroupOrWorldWritableEntryIsRefused) {
  DiskStore store(root_);
  std::string path = entry_path(root_, kKey);
  for (mode_t mode : {mode_t(0666), mode_t(0620), mode_t(0602)}) {
    ASSERT_TRUE(store.store(kKey, "payload"));
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    int64_t discarded_before = stats().cache_entries_discarded.load();
    EXPECT_FALSE(store.load(kKey).has_value()) << std::oct << mode;
    EXPECT_EQ(stats().cache_entries_discarded.load(), discarded_before + 1);
    EXPECT_TRUE(filesystem::exists(path));  // refused, not deleted: it isn't ours to judge
  }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_EQ(store.load(kKey).value_or(""), "payload");
}

TEST_F(DiskStoreTest, SymlinkEntryIsNotFollowed) {
  DiskStore store(root_);
  ASSERT_TRUE(store.store("cd" + kKey.substr(2), "elsewhere"));
  std::string target = entry_path(root_, "cd" + kKey.substr(2));
  filesystem::create_directories(root_ + "/" + kKey.substr(0, 2));
  filesystem::create_symlink(target, entry_path(root_, kKey));
  EXPECT_FALSE(store.load(kKey).has_value());
}

TEST_F(DiskStoreTest, CreatedDirectoriesHaveMode0700) {
  std::string directory = root_ + "/parent/child/cache";
  DiskStore store(directory);
  ASSERT_TRUE(store.enabled());
  ASSERT_TRUE(store.store(kKey, "payload"));
  for (const std::string& path : {root_ + "/parent", root_ + "/parent/child", directory, directory + "/01"}) {
    struct stat status;
    ASSERT_EQ(::stat(path.c_str(), &status), 0) << path;
    EXPECT_EQ(status.st_mode & 07777, 0700u) << path;
  }
  struct stat status;
  ASSERT_EQ(::stat(entry_path(directory, kKey).c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0077, 0u);
}

TEST_F(DiskStoreTest, EmptyDirectoryMeansMemoryOnly) {
  DiskStore store("");
  EXPECT_FALSE(store.enabled());
  EXPECT_FALSE(store.store(kKey, "payload"));
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_EQ(store.entry_count(), 0u);
  store.clear();
}

TEST_F(DiskStoreTest, DirectoryUnderRegularFileDisablesWithoutThrowing) {
  write_bytes(root_ + "/file.txt", "not a folder");
  DiskStore store(root_ + "/file.txt/cache");
  EXPECT_FALSE(store.enabled());
  EXPECT_FALSE(store.store(kKey, "payload"));
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_EQ(store.entry_count(), 0u);
  EXPECT_TRUE(store.keys().empty());
  store.clear();
}

TEST_F(DiskStoreTest, ReadOnlyDirectoryDisables) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  std::string directory = root_ + "/read-only";
  ASSERT_EQ(::mkdir(directory.c_str(), 0500), 0);
  DiskStore store(directory);
  EXPECT_FALSE(store.enabled());
  EXPECT_FALSE(store.store(kKey, "payload"));
  DiskStore nested(directory + "/cache");  // can't even be created
  EXPECT_FALSE(nested.enabled());
}

TEST_F(DiskStoreTest, StoreFailureLaterDisablesTheStore) {
  std::string directory = root_ + "/cache";
  DiskStore store(directory);
  ASSERT_TRUE(store.enabled());
  filesystem::remove_all(directory);
  write_bytes(directory, "the cache folder was replaced by a file");
  EXPECT_FALSE(store.store(kKey, "payload"));
  EXPECT_FALSE(store.enabled());
  EXPECT_FALSE(store.store(kKey, "payload"));
  EXPECT_FALSE(store.load(kKey).has_value());
}

TEST_F(DiskStoreTest, FolderRemovedWhileRunningIsRecreated) {
  std::string directory = root_ + "/cache";
  DiskStore store(directory);
  filesystem::remove_all(directory);
  EXPECT_TRUE(store.store(kKey, "payload"));
  EXPECT_EQ(store.load(kKey).value_or(""), "payload");
}

TEST_F(DiskStoreTest, InvalidKeysAreRefused) {
  DiskStore store(root_);
  for (const std::string& key : {std::string(""), std::string("a"), std::string("../escape"), std::string("a/b"),
                                 std::string("dot.dot"), std::string(300, 'a')}) {
    EXPECT_FALSE(store.store(key, "payload")) << key;
    EXPECT_FALSE(store.load(key).has_value()) << key;
  }
  EXPECT_TRUE(store.enabled());
  EXPECT_FALSE(filesystem::exists(root_ + "/../escape.mjk"));
}

TEST_F(DiskStoreTest, ConcurrentStoresOfOneKeyLeaveAValidEntry) {
  DiskStore store(root_);
  const size_t size = 1 << 20;
  std::vector<std::thread> writers;
  for (int writer = 0; writer < 4; ++writer) {
    writers.emplace_back([&store, writer, size] {
      std::string payload(size, static_cast<char>('a' + writer));
      for (int round = 0; round < 10; ++round) EXPECT_TRUE(store.store(kKey, payload));
    });
  }
  std::thread reader([&store, size] {
    for (int round = 0; round < 40; ++round) {
      auto loaded = store.load(kKey);  // readers never see a torn entry
      if (loaded) {
        EXPECT_EQ(loaded->size(), size);
      }
    }
  });
  for (std::thread& writer : writers) writer.join();
  reader.join();
  auto loaded = store.load(kKey);
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->size(), size);
  EXPECT_EQ(*loaded, std::string(size, (*loaded)[0]));
  EXPECT_GE((*loaded)[0], 'a');
  EXPECT_LE((*loaded)[0], 'd');
  size_t files = 0;
  for (const auto& entry : filesystem::recursive_directory_iterator(root_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u) << "temporary files left behind";
}

TEST_F(DiskStoreTest, ClearRemovesOnlyEntries) {
  DiskStore store(root_);
  ASSERT_TRUE(store.store(kKey, "one"));
  ASSERT_TRUE(store.store("ff" + kKey.substr(2), "two"));
  write_bytes(root_ + "/notes.txt", "user file");
  write_bytes(root_ + "/01/readme", "user file in a shard");
  write_bytes(root_ + "/01/.leftover.123.tmp", "stale temporary");
  EXPECT_EQ(store.entry_count(), 2u);
  store.clear();
  EXPECT_EQ(store.entry_count(), 0u);
  EXPECT_FALSE(store.load(kKey).has_value());
  EXPECT_TRUE(filesystem::exists(root_ + "/notes.txt"));
  EXPECT_TRUE(filesystem::exists(root_ + "/01/readme"));
  EXPECT_FALSE(filesystem::exists(root_ + "/01/.leftover.123.tmp"));
  EXPECT_FALSE(filesystem::exists(root_ + "/ff"));  // emptied shard folders go away
}

TEST(DiskStoreContentHash, IsXxh3Hex) {
  EXPECT_EQ(content_hash(""), "99aa06d3014798d86001c324468d497f");  // XXH3-128 of no bytes, as xxh128sum prints
  std::string hash = content_hash("extern \"C\" void metajit_kernel() {}");
  EXPECT_EQ(hash.size(), 32u);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(hash, content_hash("extern \"C\" void metajit_kernel() {}"));
  EXPECT_NE(hash, content_hash("extern \"C\" void metajit_kernel() {} "));
  EXPECT_EQ(checksum64("", 0), 0x2d06800538d394c2ull);  // XXH3-64 of no bytes
  EXPECT_NE(checksum64("a", 1), checksum64("b", 1));
}

}  // namespace
}  // namespace metajit
