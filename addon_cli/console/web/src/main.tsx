// The console's page: PatternFly's page layout around the fleet view.
import "@patternfly/react-core/dist/styles/base.css";
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  Masthead,
  MastheadBrand,
  MastheadContent,
  MastheadMain,
  Page,
} from "@patternfly/react-core";
import { whoami } from "./api";
import { FleetView } from "./FleetView";

function App() {
  const [user, setUser] = useState("");
  useEffect(() => {
    whoami()
      .then((u) => setUser(u.username))
      .catch((err: Error) => setUser(`not signed in: ${err.message}`));
  }, []);
  const masthead = (
    <Masthead>
      <MastheadMain>
        <MastheadBrand>Model serving fleet</MastheadBrand>
      </MastheadMain>
      <MastheadContent>
        <span data-testid="user">{user}</span>
      </MastheadContent>
    </Masthead>
  );
  return (
    <Page masthead={masthead}>
      <FleetView />
    </Page>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
