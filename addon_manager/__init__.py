"""Hub-side manager: hub intents to ManifestWorks, status back."""
