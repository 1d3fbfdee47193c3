"""The model: the strategy catalog (loaded and validated from YAML), the answers, the decision
engine, the template's questions and the template settings answers imply. Imports no feature or UI."""
