"""The compare view (``--replay A --compare B``): a second app, two recorded runs side by side
on one step clock. It shares the formatting and the theme with the main app, not its
machinery."""
