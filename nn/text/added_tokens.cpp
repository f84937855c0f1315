// added_tokens.cpp — the Aho-Corasick automaton over the added tokens, spelled backwards
// (added_tokens.h).
#include "nn/text/added_tokens.h"

#include <algorithm>
#include <numeric>

namespace gg::nn {

AddedTokens::AddedTokens(std::vector<Token> tokens) : tokens_(std::move(tokens)) {
    std::vector<std::string> reversed;
    reversed.reserve(tokens_.size());
    for (const Token& t : tokens_) reversed.emplace_back(t.content.rbegin(), t.content.rend());
    // Sorted, the tokens below a node of the trie are a run of `order`, and so are those below
    // each of its children, by the byte that follows.
    std::vector<int32_t> order(tokens_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return reversed[size_t(a)] < reversed[size_t(b)]; });
    const auto spelled = [&](size_t k) -> const std::string& { return reversed[size_t(order[k])]; };

    // Breadth first: a node's failure is shallower than the node, so it is complete (its
    // children known) by the time the node's children need it.
    struct Pending {
        int32_t node;
        size_t first, last, depth;  // order[first, last) are the tokens below the node, at this depth
    };
    nodes_.emplace_back();
    from_root_.fill(0);
    std::vector<Pending> queue{{0, 0, order.size(), 0}};
    for (size_t q = 0; q < queue.size(); ++q) {
        auto [node, first, last, depth] = queue[q];
        while (first < last && spelled(first).size() == depth) ++first;  // tokens that end here sort first
        nodes_[size_t(node)].first_edge = uint32_t(edge_byte_.size());
        while (first < last) {
            const auto byte = uint8_t(spelled(first)[depth]);
            size_t end = first;
            while (end < last && uint8_t(spelled(end)[depth]) == byte) ++end;
            Node below;
            below.fail = node == 0 ? 0 : next(nodes_[size_t(node)].fail, byte);
            // The longest token ending its path is the path itself, or else the failure's.
            below.longest = spelled(first).size() == depth + 1 ? order[first] : nodes_[size_t(below.fail)].longest;
            const auto id = int32_t(nodes_.size());
            nodes_.push_back(below);
            edge_byte_.push_back(byte);
            edge_node_.push_back(id);
            if (node == 0) from_root_[byte] = id;
            queue.push_back({id, first, end, depth + 1});
            first = end;
        }
        nodes_[size_t(node)].edges = uint32_t(edge_byte_.size()) - nodes_[size_t(node)].first_edge;
    }
}

int32_t AddedTokens::child(int32_t node, uint8_t byte) const {
    const Node& n = nodes_[size_t(node)];
    const auto first = edge_byte_.begin() + n.first_edge, last = first + n.edges;
    const auto it = std::lower_bound(first, last, byte);
    return it != last && *it == byte ? edge_node_[size_t(it - edge_byte_.begin())] : -1;
}

int32_t AddedTokens::next(int32_t node, uint8_t byte) const {
    for (;;) {
        if (node == 0) return from_root_[byte];
        if (const int32_t c = child(node, byte); c >= 0) return c;
        node = nodes_[size_t(node)].fail;
    }
}

std::vector<AddedTokens::Match> AddedTokens::find(std::string_view text) const {
    std::vector<Match> matches;
    if (empty()) return matches;
    // From the last byte to the first: where a token starts, the longest one starting there.
    std::vector<std::pair<size_t, int32_t>> starts;  // (byte, token), last byte first
    int32_t node = 0;
    for (size_t i = text.size(); i-- > 0;) {
        node = next(node, uint8_t(text[i]));
        if (nodes_[size_t(node)].longest >= 0) starts.emplace_back(i, nodes_[size_t(node)].longest);
    }
    // From the first byte on: the leftmost start that no earlier match covers.
    size_t covered = 0;
    for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
        if (it->first < covered) continue;
        const Token& t = tokens_[size_t(it->second)];
        covered = it->first + t.content.size();
        matches.push_back({it->first, covered, t.id});
    }
    return matches;
}

}  // namespace gg::nn
