// `wgrt chat` driven through a pipe, as a script would: two turns (the second prefills only
// its new tokens), /clear, Ctrl-C (SIGINT) ending a reply without ending the chat, and
// clear errors for a model without a template (exit 1) and bad flags (exit 2).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sys/wait.h>

#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"
#include "support/run_script.h"

namespace wgrt {
namespace {

using Result = test::ScriptResult;

// The script with $WGRT the binary (support/run_script.h).
Result run_script(const std::string& script) { return test::run_script("chatcli-run", script); }

struct Files {
  std::string gguf, bare;
};

const Files& files() {
  static Files f = [] {
    std::string dir = test::temp_dir("chatcli");
    model::GgufWriter w = model::make_random_model(model::RandomModelSpec{});
    Files x{dir + "/chat.gguf", dir + "/bare.gguf"};
    model::gguf_write_file(w, x.bare);
    model::gguf_set_string(w, "tokenizer.chat_template",
                           "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
                           "{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}");
    model::gguf_write_file(w, x.gguf);
    return x;
  }();
  return f;
}

struct Turn {
  size_t total, reused, prefilled, generated;
  std::string stop;
};

std::vector<Turn> turns(const std::string& err) {
  static const std::regex re(R"(turn of (\d+) tokens: (\d+) reused from the cache, (\d+) prefilled in [0-9.]+ s; (\d+) )"
                             R"(generated in [0-9.]+ s \([0-9.]+ tok/s\); stopped by (\w+))");
  std::vector<Turn> out;
  for (std::sregex_iterator it(err.begin(), err.end(), re), end; it != end; ++it)
    out.push_back({std::stoul((*it)[1]), std::stoul((*it)[2]), std::stoul((*it)[3]), std::stoul((*it)[4]), (*it)[5]});
  return out;
}

TEST(ChatCli, TwoTurnsThenClear) {
  Result r = run_script("printf 'Hello\\nHow are you?\\n/clear\\nHello\\n' | $WGRT chat -m " + files().gguf +
                        " --temp 0 -n 6 -c 512 --system 'Be brief.'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<Turn> t = turns(r.err);
  ASSERT_EQ(t.size(), 3u) << r.err;
  // Turn 1: BOS + the bytes of the rendered system and user turns and the assistant header.
  const size_t p1 = std::string("<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                                "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                                "<|start_header_id|>assistant<|end_header_id|>\n\n").size();
  EXPECT_EQ(t[0].total, 1 + p1);
  EXPECT_EQ(t[0].reused, 0u);
  EXPECT_EQ(t[0].generated, 6u);
  // Turn 2 reuses everything turn 1 evaluated (its prompt and 5 of its 6 tokens).
  EXPECT_EQ(t[1].reused, t[0].total + 5);
  EXPECT_EQ(t[1].prefilled, t[1].total - t[1].reused);
  EXPECT_LT(t[1].prefilled, t[1].total / 2);
  EXPECT_NE(r.err.find("conversation cleared"), std::string::npos);
  EXPECT_EQ(t[2].reused, 0u);
  EXPECT_EQ(t[2].total, t[0].total);
  // Greedy: after /clear the same first turn gives the same reply (line 1 and line 3).
  std::vector<std::string> lines;
  for (size_t b = 0, e; (e = r.out.find('\n', b)) != std::string::npos; b = e + 1) lines.push_back(r.out.substr(b, e - b));
  if (lines.size() == 3) {  // replies may hold newlines; then this check does not apply
    EXPECT_EQ(lines[0], lines[2]);
  }
}

// A conversation past the context goes on: the oldest turns leave it with a one-line notice,
// and a single message too long for the context is refused while the chat goes on.
TEST(ChatCli, ContextShiftDropsOldTurnsWithANotice) {
  const std::string line(150, 'w');
  Result r = run_script("printf '" + line + "1\\n" + line + "2\\n" + line + "3\\n" + std::string(600, 'x') +
                        "\\nOk\\n' | $WGRT chat -m " + files().gguf + " --temp 0 -n 4 -c 512 --system 'Be brief.'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<Turn> t = turns(r.err);
  ASSERT_EQ(t.size(), 4u) << r.err;
  static const std::regex notice(R"(context shift: the (\d+) oldest messages \((\d+) tokens\) left the conversation)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, notice)) << r.err;
  EXPECT_EQ(std::stoul(m[1]) % 2, 0u) << "whole user/assistant pairs";
  for (const Turn& x : t) EXPECT_LE(x.total + 4, 512u) << r.err;
  EXPECT_NE(r.err.find("this message and the system prompt take"), std::string::npos) << r.err;
}

TEST(ChatCli, SlashCommandsAreAnsweredNotSent) {
  Result r = run_script("printf '/help\\n/bogus now\\n//x\\n/exit\\n' | $WGRT chat -m " + files().gguf +
                        " --temp 0 -n 2 -c 512");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("/clear"), std::string::npos) << r.err;  // /help lists the commands
  EXPECT_NE(r.err.find("unknown command '/bogus' (not sent to the model); the commands are /help, /clear, /exit, "
                       "/quit"),
            std::string::npos)
      << r.err;
  // Only '//x' reached the model, as the user turn "/x".
  std::vector<Turn> t = turns(r.err);
  ASSERT_EQ(t.size(), 1u) << r.err;
  const size_t p1 = std::string("<|start_header_id|>user<|end_header_id|>\n\n/x<|eot_id|>"
                                "<|start_header_id|>assistant<|end_header_id|>\n\n").size();
  EXPECT_EQ(t[0].total, 1 + p1);
}

TEST(ChatCli, CtrlCStopsTheReplyNotTheChat) {
  // Replies that would run until the context is full; SIGINT once each streams.
  Result r = run_script(
      "dir=$(mktemp -d)\n"
      "mkfifo $dir/in\n"
      "$WGRT chat -m " + files().gguf + " --temp 0 -c 4096 <$dir/in 2>$dir/err &\n"
      "pid=$!\n"
      "exec 3>$dir/in\n"
      "echo Hello >&3\n"
      "for i in $(seq 600); do grep -q 'chatting with' $dir/err && break; sleep 0.1; done\n"
      "sleep 1\n"
      "kill -INT $pid\n"
      "for i in $(seq 600); do [ $(grep -c 'turn of' $dir/err) -ge 1 ] && break; sleep 0.1; done\n"
      "echo Again >&3\n"
      "sleep 1\n"
      "kill -INT $pid\n"
      "for i in $(seq 600); do [ $(grep -c 'turn of' $dir/err) -ge 2 ] && break; sleep 0.1; done\n"
      "echo /exit >&3\n"
      "exec 3>&-\n"
      "wait $pid; code=$?\n"
      "cat $dir/err >&2\n"
      "rm -rf $dir\n"
      "exit $code");
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<Turn> t = turns(r.err);
  ASSERT_EQ(t.size(), 2u) << r.err;
  EXPECT_EQ(t[0].stop, "interrupted") << r.err;
  EXPECT_LT(t[0].reused + t[0].prefilled + t[0].generated, 4096u);
  EXPECT_EQ(t[1].stop, "interrupted") << r.err;
  // The interrupted reply stayed in the conversation and in the cache: an interrupt comes
  // between tokens, after the last shown one was evaluated.
  EXPECT_EQ(t[1].reused, t[0].total + t[0].generated);
}

TEST(ChatCli, ErrorsExitCleanly) {
  Result r = run_script("echo Hi | $WGRT chat -m " + files().bare);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("no tokenizer.chat_template"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--chat-template"), std::string::npos) << r.err;
  r = run_script("echo Hi | $WGRT chat -m " + files().gguf + " --temp x");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("hint"), std::string::npos) << r.err;
  r = run_script("echo Hi | $WGRT chat");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace wgrt
