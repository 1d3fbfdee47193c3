"""Design review: judge a team's current design against its answers, plan the migration and the
proof, and render it all as a decision record (Markdown, MADR)."""
