/**
 * Thumbs up or down under each answer (PUT / DELETE /api/threads/:threadId/messages/:answerId/feedback).
 * The user's rating shows pressed; pressing it again takes it back, pressing the other replaces it.
 */
import { h } from "./render.js";

// A word beside each emoji: a system without an emoji font still reads it.
const THUMBS = [
  { rating: "up", label: "👍 Good", name: "Good answer" },
  { rating: "down", label: "👎 Bad", name: "Bad answer" },
];

/**
 * The thumbs of one answer: `feedback` is its rating as the messages API shows it (null: none);
 * `onRate(rating)` is called with the rating the press leaves ("up", "down", or null to remove it).
 */
export function feedbackControls(feedback, onRate) {
  const current = feedback?.rating ?? null;
  return h(
    "div",
    { class: "feedback", role: "group", "aria-label": "Rate this answer" },
    THUMBS.map(({ rating, label, name }) => {
      const pressed = current === rating;
      const thumb = h(
        "button",
        {
          type: "button",
          class: "thumb",
          "aria-label": name,
          "aria-pressed": String(pressed),
          title: pressed ? `${name} (yours): press again to take it back` : name,
        },
        label,
      );
      thumb.addEventListener("click", () => onRate(pressed ? null : rating));
      return thumb;
    }),
  );
}

/** Stores the user's rating of an answer (null removes it); answers the feedback as the messages API would show it. */
export async function rateAnswer(api, threadId, answerId, rating) {
  if (rating === null) {
    await api.unrateAnswer(threadId, answerId);
    return null;
  }
  return (await api.rateAnswer(threadId, answerId, rating)).feedback;
}
