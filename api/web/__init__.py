"""The web dashboard served at `/`: HTML shells and static assets that hold no data (served
without a token), filled in the browser from the API with the token the user enters."""
