/**
 * The full-text search over a user's messages (migration 0009: messages.search, a tsvector
 * generated from the message's text, and the GIN index messages_search_idx on (user_id, search)).
 *
 * Every statement uses the 'english' configuration the column is generated with: a query parsed
 * with another configuration would look for lexemes the index does not hold.
 */

/**
 * One page of the user's matches, best first: the matches are found in messages_search_idx (the
 * user's entries and the query's lexemes intersected inside the index), ranked, cut to the page
 * after the cursor, and only then joined back for the fields and snippet the page shows, so
 * ts_headline runs on $6 rows, never on every match.
 *
 * $1 user id, $2 the query (websearch syntax), $3 include off-path messages, $4/$5 the cursor's
 * rank and id (NULL for the first page), $6 rows to read.
 *
 * Order is (rank DESC, id DESC): rank is a pure function of the message's text and the query
 * (ts_rank_cd uses no statistics of other messages) and stored messages never change text, so a
 * message keeps its place between pages; id makes the order total among equal ranks.
 * Normalization 1 divides by 1 + log(length): a long answer does not win by length alone. The rank
 * is numeric (the real rounded to 6 digits, deterministically) because numeric text is exact: the
 * cursor carries it as text, and a real's text depends on the session's extra_float_digits.
 * The snippet: ts_headline's passage of 15 to 35 words around the best match (the whole text when
 * shorter), matches between U+E000 and U+E001 (private use). In the text given to it those two are
 * first replaced by U+FFFD, so every marker is one ts_headline put there, and < > by the controls
 * U+0001/U+0002 (the text's own U+0001/U+0002 become U+FFFD): its parser drops what looks like an
 * HTML tag, which would cut `<T>` or `a<b` out of a message. The stand-ins must be ASCII: under a C
 * locale (the embedded server's) the parser counts every non-ASCII character as a letter, so a
 * private-use stand-in glued `<b>bold` into one word and left the match unmarked.
 * search.ts turns the markers back into escaped HTML.
 */
export const searchMessages = `
  SELECT m.id, m.thread_id, m.kind, m.on_path, m.created_at, page.rank,
         ts_headline('english', translate(threadline_message_text(m.content), E'\\uE000\\uE001\\u0001\\u0002<>', E'\\uFFFD\\uFFFD\\uFFFD\\uFFFD\\u0001\\u0002'),
                     websearch_to_tsquery('english', $2), E'StartSel=\\uE000, StopSel=\\uE001, MinWords=15, MaxWords=35') AS snippet
  FROM (
    SELECT id, rank FROM (
      SELECT m.id, ts_rank_cd(m.search, websearch_to_tsquery('english', $2), 1)::numeric AS rank
      FROM messages m
      WHERE m.user_id = $1 AND m.search @@ websearch_to_tsquery('english', $2) AND (m.on_path OR $3::boolean)
      -- A fence: pulled up, the rank would be computed twice per match, in the cursor's filter and for the sort.
      OFFSET 0
    ) matches
    WHERE $4::numeric IS NULL OR (rank, id) < ($4::numeric, $5::uuid)
    ORDER BY rank DESC, id DESC
    LIMIT $6
  ) page
  JOIN messages m ON m.id = page.id
  ORDER BY page.rank DESC, page.id DESC`;
export type SearchMessagesRow = {
  id: string;
  thread_id: string;
  kind: "user" | "agent";
  on_path: boolean;
  created_at: Date;
  rank: string;
  snippet: string;
};
