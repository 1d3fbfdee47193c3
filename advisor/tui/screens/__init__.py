"""The TUI's screens, one per file: each is one step of the walkthrough (welcome, questions,
recommendation, generate, drill, probe, the review's steps, export, help)."""
